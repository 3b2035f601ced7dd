// Device faults survived (core/fault.hpp's injector, ROCKY_FAULT): a lost device or a failed device
// allocation during a step fails that job as a device fault (Job::fault: the server's 503) and the
// next job on the same scheduler is served, with the same greedy tokens as before the fault — the
// context was made again, the weights kept. Sessions (-np) and the batch engine, CPU and Vulkan.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "core/fault.hpp"
#include "model/model.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/batch.hpp"
#include "runtime/options.hpp"
#include "runtime/scheduler.hpp"
#include "runtime/session.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky {
namespace {

struct Fixture {
  std::unique_ptr<model::Model> m = model::Model::load(test::shared_path("reference/models/stories260K.gguf"));
  tok::Tokenizer tok = tok::Tokenizer::from_gguf(m->file());
};

std::shared_ptr<backend::Backend> make(const std::string& dev) {
  runtime::BackendOptions bo;
  bo.device = dev;
  bo.kv_f16 = false;
  return runtime::make_backend(bo);
}

// Runs one greedy job of 24 tokens; returns it done.
std::shared_ptr<runtime::Job> run(runtime::Scheduler& s, const std::vector<int32_t>& p) {
  auto job = std::make_shared<runtime::Job>();
  job->prompt = p;
  job->params.sampling.temp = 0;
  job->params.max_tokens = 24;
  job->params.ignore_eos = true;
  EXPECT_EQ(s.submit(job), runtime::Scheduler::Admit::Accepted);
  job->wait();
  return job;
}

// The server's one engine with two slots, batched (continuous batching) or one request per step
// (--no-cont-batching).
std::unique_ptr<runtime::Scheduler> scheduler(Fixture& f, const std::shared_ptr<backend::Backend>& be, bool batched) {
  runtime::BatchOptions bo;
  bo.n_seq = 2;
  bo.n_ctx = 128;
  bo.max_seqs = batched ? 0 : 1;
  auto e = std::make_shared<runtime::BatchEngine>(*f.m, be, bo);
  return std::make_unique<runtime::Scheduler>(f.tok, e, 4);
}

void faults(const std::string& dev, bool batched) {
  SCOPED_TRACE(dev + (batched ? " batched" : " one request per step"));
  Fixture f;
  auto be = make(dev);
  std::unique_ptr<runtime::Scheduler> s = scheduler(f, be, batched);
  const auto p = test::random_prompt(40, 5, f.m->hparams().n_vocab);
  auto base = run(*s, p);
  ASSERT_TRUE(base->error.empty()) << base->error;
  ASSERT_EQ(base->result->tokens.size(), 24u);

  // A lost device in the 5th step from now (mid-decode): that job fails as a fault, naming it.
  fault::install(runtime::parse_fault("lost@5"));
  auto lost = run(*s, p);
  EXPECT_TRUE(lost->fault);
  EXPECT_NE(lost->error.find("VK_ERROR_DEVICE_LOST"), std::string::npos) << lost->error;
  EXPECT_EQ(fault::injected(fault::Kind::Lost), 1u);
  // The next job is served on the remade context: the same tokens.
  auto after = run(*s, p);
  ASSERT_TRUE(after->error.empty()) << after->error;
  EXPECT_EQ(after->result->tokens, base->result->tokens);

  // A lost device whose recovery cannot allocate (every allocation fails): the job fails as a
  // fault, and so does the next one while the context cannot be made; once memory comes back the
  // server serves again.
  fault::install(runtime::parse_fault("lost@2,alloc%1"));
  auto a = run(*s, p);
  EXPECT_TRUE(a->fault) << a->error;
  auto b = run(*s, p);
  EXPECT_TRUE(b->fault) << b->error;
  EXPECT_NE(b->error.find("VK_ERROR_OUT_OF_DEVICE_MEMORY"), std::string::npos) << b->error;
  fault::install({});
  auto c = run(*s, p);
  ASSERT_TRUE(c->error.empty()) << c->error;
  EXPECT_EQ(c->result->tokens, base->result->tokens);
  // A bad request is still not a fault: a prompt longer than the context.
  auto big = run(*s, test::random_prompt(200, 6, f.m->hparams().n_vocab));
  EXPECT_FALSE(big->error.empty());
  EXPECT_FALSE(big->fault);
}

TEST(Fault, CpuOneRequestPerStep) { faults("cpu", false); }
TEST(Fault, CpuBatched) { faults("cpu", true); }
TEST(Fault, VulkanOneRequestPerStep) { faults("vulkan", false); }
TEST(Fault, VulkanBatched) { faults("vulkan", true); }

// On Vulkan a step's own device allocation (the activation arena of a new shape) can fail too.
TEST(Fault, VulkanAllocInStep) {
  Fixture f;
  auto be = make("vulkan");
  std::unique_ptr<runtime::Scheduler> sp = scheduler(f, be, true);
  runtime::Scheduler& s = *sp;
  const auto p = test::random_prompt(40, 5, f.m->hparams().n_vocab);
  fault::install(runtime::parse_fault("alloc@1"));
  auto a = run(s, p);
  EXPECT_TRUE(a->fault) << a->error;
  EXPECT_NE(a->error.find("VK_ERROR_OUT_OF_DEVICE_MEMORY"), std::string::npos) << a->error;
  auto b = run(s, p);
  EXPECT_TRUE(b->error.empty()) << b->error;
  fault::install({});
}

}  // namespace
}  // namespace rocky
