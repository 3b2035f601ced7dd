// Hardening from public bug reports of Vulkan LLM engines: each test makes the
// reproduction's input (a rewritten GGUF, a synth model, a cache path that is a directory, …) and
// checks that rocky neither fails needlessly nor prints a silently wrong answer.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/vulkan/vulkan_backend.hpp"
#include "core/error.hpp"
#include "graph/planner.hpp"
#include "harden/harden_util.hpp"
#include "model/model.hpp"
#include "runtime/sampler.hpp"
#include "runtime/session.hpp"

namespace rocky {
namespace {

using namespace rocky::test;

std::string stories() { return shared_path("reference/models/stories260K.gguf"); }

vulkan::VulkanOptions vk_opts() {
  vulkan::VulkanOptions o;
  o.persist_pipeline_cache = false;
  return o;
}

// ---- 1. a large -ub must not fail on the binding limit -------------------------------------------

// The report: Qwen2.5-1.5B's shapes, 1 layer, a 3,902-token prompt at -ub 4096 needs a 139,847,680-byte
// binding (ffn [8960, 3902] f32) over lavapipe's 128 MiB. The same shapes with a 4 MiB binding cap
// (a smaller device) and a 300-token prompt hit the limit the same way, at a cost a test can pay.
TEST(Harden, LargeUbatchIsCappedToTheBindingLimit) {
  const std::string dir = scratch_dir("harden-ubatch");
  const std::string file = dir + "/q1.5b-1l.gguf";
  auto s = run_rocky("harden-ubatch-synth", {"synth", "--preset", "qwen2.5-1.5b", "--layers", "1", "--vocab", "512",
                                             "--type", "q4_k_m", "-q", "-o", file});
  ASSERT_EQ(s.rc, 0) << s.err;
  auto m = model::Model::load(file);
  ASSERT_EQ(m->hparams().n_ff, 8960);
  std::mt19937 rng(7);
  std::vector<int32_t> ids(300);
  for (auto& t : ids) t = static_cast<int32_t>(rng() % 512);
  constexpr uint64_t k_cap_bytes = 4u << 20;
  auto gpu = [&] {
    auto o = vk_opts();
    o.max_binding = k_cap_bytes;
    return std::make_unique<vulkan::VulkanBackend>(o);
  };
  // The reproduction: one 300-token ubatch does not fit the bindings.
  {
    auto be = gpu();
    graph::Graph g = m->build_graph({300, 0, 512, model::Logits::LAST});
    graph::Plan p = graph::plan_arena(g);
    be->load_weights(g.weights());
    be->init_kv(g.kv);
    std::vector<float> out(512);
    try {
      be->compute(g, p, ids, out);
      FAIL() << "expected the binding limit to be exceeded";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "storage binding limit")) << e.what();
    }
  }
  // -ub 4096: capped (said once on stderr) and equal to the run at the capped size.
  const int32_t cap = static_cast<int32_t>((k_cap_bytes - 260) / (8960 * 4));  // Recorder::bind's slack
  testing::internal::CaptureStderr();
  runtime::Session big(*m, gpu(), {512, 4096});
  auto a = big.eval(ids);
  auto a2 = big.eval(std::span<const int32_t>(ids).first(40));  // a second capped eval: said only once
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err, "-ub 4096 capped to " + std::to_string(cap) + " tokens")) << err;
  EXPECT_TRUE(contains(err, "ffn_")) << err;
  EXPECT_EQ(err.find("capped"), err.rfind("capped")) << err;
  runtime::Session small(*m, gpu(), {512, cap});
  auto b = small.eval(ids);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "logit " << i;
  // And the CPU agrees (the int8 path's 0.35 absolute bound, as rocky verify).
  runtime::Session cpu(*m, backend::cpu::make_cpu_backend(), {512, 4096});
  auto c = cpu.eval(ids);
  double md = 0;
  for (size_t i = 0; i < a.size(); ++i) md = std::max(md, std::fabs(double(a[i]) - c[i]));
  EXPECT_LE(md, 0.35);
  EXPECT_EQ(runtime::argmax(a), runtime::argmax(c));
}

// ---- 2. never sample an id the vocabulary does not have ------------------------------------------

// stories260K with its token arrays cut to 300 of its 512 rows; the output rows past the vocabulary
// are scaled up so that they would win the argmax if they were candidates.
std::string cut_vocab_model() {
  const std::string out = scratch_dir("harden-vocab") + "/stories-cut300.gguf";
  rewrite_gguf(
      stories(), out,
      [](std::string_view key, const gguf::Value& v, gguf::Writer& w) {
        if (key == "tokenizer.ggml.tokens") {
          std::vector<std::string_view> t(v.strings.begin(), v.strings.begin() + 300);
          w.set_string_array(key, t);
          return false;
        }
        if (key == "tokenizer.ggml.scores") {
          std::vector<float> x(300);
          std::memcpy(x.data(), v.raw, 300 * 4);
          w.set_f32_array(key, x);
          return false;
        }
        if (key == "tokenizer.ggml.token_type") {
          std::vector<int32_t> x(300);
          std::memcpy(x.data(), v.raw, 300 * 4);
          w.set_i32_array(key, x);
          return false;
        }
        return true;
      },
      [](const gguf::TensorInfo& t, TensorEdit& e) {
        if (t.name != "output.weight") return;
        for (size_t i = 300 * 64; i < 512 * 64; ++i) set_f32(e.data, i, get_f32(e.data, i) * 8.0f);
      });
  return out;
}

TEST(Harden, PaddedTableRowsAreNeverSampled) {
  const std::string model = cut_vocab_model();
  const std::string dir = scratch_dir("harden-vocab");
  for (const char* device : {"cpu", "vulkan:0"}) {
    for (const char* temp : {"0", "1.5"}) {
      auto r = run_rocky("harden-vocab-run",
                         {"run", "-m", model, "-p", "Once upon a time", "-n", "24", "--temp", temp, "--seed", "5",
                          "--ignore-eos", "--json", "--device", device, "--dump-logits", dir + "/last.f32"});
      ASSERT_EQ(r.rc, 0) << r.err;
      EXPECT_TRUE(contains(r.err, "token_embd.weight has 512 rows, the vocabulary 300 tokens")) << r.err;
      auto j = nlohmann::json::parse(r.out);
      ASSERT_EQ(j["generated_ids"].size(), 24u) << r.out;
      for (int id : j["generated_ids"]) EXPECT_LT(id, 300) << device << " --temp " << temp;
      // The reproduction is real: unmasked, a padded row wins.
      auto bytes = read_file_bytes(dir + "/last.f32");
      ASSERT_EQ(bytes.size(), 512u * 4);
      std::vector<float> l(512);
      std::memcpy(l.data(), bytes.data(), bytes.size());
      EXPECT_GE(runtime::argmax(l), 300);
      EXPECT_LT(runtime::argmax(l, 300), 300);
    }
  }
  auto v = run_rocky("harden-vocab-verify", {"verify", "-m", model, "--json"});
  ASSERT_EQ(v.rc, 0) << v.out << v.err;
  auto j = nlohmann::json::parse(v.out);
  for (const auto& p : j["positions"]) {
    EXPECT_LT(p["cpu_top1"].get<int>(), 300);
    EXPECT_LT(p["gpu_top1"].get<int>(), 300);
  }
}

TEST(Harden, SamplerMasksIdsPastTheVocabulary) {
  std::vector<float> l = {0.1f, 2.0f, 1.0f, 50.0f, 49.0f};
  for (float temp : {0.0f, 0.7f, 5.0f}) {
    runtime::SamplerParams p;
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 9;
    p.n_vocab = 3;
    runtime::Sampler s(p);
    for (int i = 0; i < 200; ++i) EXPECT_LT(s.sample(l), 3) << temp;
  }
  EXPECT_EQ(runtime::argmax(l), 3);
  EXPECT_EQ(runtime::argmax(l, 3), 1);
}

// ---- 3. NaN or inf logits are an error, not text -------------------------------------------------

TEST(Harden, NonFiniteLogitsStopRunWithTheNode) {
  const std::string model = scratch_dir("harden-nan") + "/stories-nan-norm.gguf";
  rewrite_gguf(stories(), model, nullptr, [](const gguf::TensorInfo& t, TensorEdit& e) {
    if (t.name == "output_norm.weight") set_f32(e.data, 17, std::nanf(""));
  });
  for (const char* device : {"cpu", "vulkan:0"}) {
    for (const char* temp : {"0", "0.8"}) {
      auto r = run_rocky("harden-nan-run",
                         {"run", "-m", model, "-p", "Once upon a time", "-n", "8", "--temp", temp, "--device", device});
      EXPECT_EQ(r.rc, 1) << device << "\n" << r.out << r.err;
      EXPECT_TRUE(contains(r.err, "non-finite logits (NaN) at position 4")) << r.err;
      EXPECT_TRUE(contains(r.err, "first non-finite node: result_norm (rms_norm of output_norm.weight)")) << r.err;
      EXPECT_FALSE(contains(r.out, "#")) << r.out;
    }
  }
  // The server path evaluates through Session::eval too: one in-process decode step.
  auto m = model::Model::load(model);
  runtime::Session s(*m, std::make_unique<vulkan::VulkanBackend>(vk_opts()), {64, 512});
  const int32_t bos = 1;
  EXPECT_THROW(s.eval(std::span<const int32_t>(&bos, 1)), Error);
}

// ---- 4. f16 KV: values past 65504 are stored saturated, not inf ----------------------------------

TEST(Harden, F16KvCacheSaturates) {
  const std::string model = scratch_dir("harden-f16") + "/stories-big-k.gguf";
  rewrite_gguf(stories(), model, nullptr, [](const gguf::TensorInfo& t, TensorEdit& e) {
    if (t.name != "blk.0.attn_k.weight") return;
    for (size_t i = 0; i < t.n_elements; ++i) set_f32(e.data, i, get_f32(e.data, i) * 3.0e5f);
  });
  auto m = model::Model::load(model);
  const std::vector<int32_t> ids = {1, 403, 407, 261, 119, 3, 300, 42, 97, 12};
  graph::Graph g = m->build_graph({int32_t(ids.size()), 0, 16, model::Logits::ALL});
  graph::Plan p = graph::plan_arena(g, 256, /*reuse=*/false);
  // The input: |K| of layer 0 is past f16's range (CPU oracle, f32 KV).
  backend::cpu::CpuBackend cpu;
  cpu.load_weights(g.weights());
  auto cctx = cpu.make_context({g.kv, 1});
  std::vector<float> lc(ids.size() * 512);
  cctx->compute(g, p, ids, lc);
  float kmax = 0;
  for (int32_t i = 0; i < int32_t(g.nodes.size()); ++i) {
    const auto& n = g.nodes[size_t(i)];
    if (n.op == graph::Op::KV_STORE && n.layer == 0 && n.kv == 0) {
      for (float x : cctx->read_node(g, p, n.src[0])) kmax = std::max(kmax, std::fabs(x));
    }
  }
  EXPECT_GT(kmax, 65504.0f * 4);
  auto o = vk_opts();
  o.kv_f16 = true;
  vulkan::VulkanBackend gpu(o);
  gpu.load_weights(g.weights());
  gpu.init_kv(g.kv);
  std::vector<float> lg(lc.size());
  gpu.compute(g, p, ids, lg);
  size_t bad = 0;
  for (float x : lg) bad += !std::isfinite(x);
  EXPECT_EQ(bad, 0u);
  // Saturated K keeps the huge scores huge (near one-hot attention rows, as in f32): the text stays
  // close to the CPU's (measured: top-1 agrees at 7 of 10 positions).
  int agree = 0;
  for (size_t j = 0; j < ids.size(); ++j) {
    std::span<const float> a(lc.data() + j * 512, 512), b(lg.data() + j * 512, 512);
    agree += runtime::argmax(a) == runtime::argmax(b);
  }
  EXPECT_GE(agree, int(ids.size()) / 2);
}

// ---- 5. the pipeline cache is optional -----------------------------------------------------------

std::string find_cache(const std::string& cache_home) {
  for (const auto& e : std::filesystem::directory_iterator(cache_home + "/rocky"))
    if (e.path().filename().string().rfind("pipelines-", 0) == 0 && e.path().extension() == ".bin") return e.path();
  return "";
}

TEST(Harden, PipelineCacheDirectoryOrFifoRunsWithoutIt) {
  const std::string home = scratch_dir("harden-cache") + "/xdg";
  std::filesystem::remove_all(home);
  const std::string env = "XDG_CACHE_HOME='" + home + "'";
  const std::vector<std::string> verify = {"verify", "-m", stories(), "-p", "Lily went to the park."};
  auto r = run_rocky("harden-cache", verify, env);
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  const std::string cache = find_cache(home);
  ASSERT_FALSE(cache.empty());
  // A directory at the cache path.
  std::filesystem::remove(cache);
  std::filesystem::create_directories(cache);
  r = run_rocky("harden-cache", verify, env);
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "it is a directory; running without a pipeline cache")) << r.err;
  EXPECT_TRUE(std::filesystem::is_directory(cache));
  // A FIFO (reading it would block forever).
  std::filesystem::remove(cache);
  ASSERT_EQ(::mkfifo(cache.c_str(), 0600), 0);
  r = run_rocky("harden-cache", verify, "timeout 60 env " + env);
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "not a regular file; running without a pipeline cache")) << r.err;
  std::filesystem::remove(cache);
  // Four processes exiting together: one whole cache file, no temporary left behind.
  std::string cmd;
  for (int i = 0; i < 4; ++i) {
    cmd += env + " '" ROCKY_BINARY_DIR "/rocky' verify -m '" + stories() +
           "' -p 'Lily went to the park.' >/dev/null 2>&1 & ";
  }
  cmd += "wait";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(home + "/rocky")) {
    ++files;
    EXPECT_EQ(e.path().string(), cache) << "left behind: " << e.path();
  }
  EXPECT_EQ(files, 1u);
  auto bytes = read_file_bytes(cache);
  ASSERT_GE(bytes.size(), 32u);
  uint32_t hdr[2];
  std::memcpy(hdr, bytes.data(), 8);
  EXPECT_EQ(hdr[0], 32u);  // VkPipelineCacheHeaderVersionOne: header length
  EXPECT_EQ(hdr[1], 1u);   // VK_PIPELINE_CACHE_HEADER_VERSION_ONE
  r = run_rocky("harden-cache", verify, env);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(contains(r.err, "pipeline cache")) << r.err;
}

// ---- 6. messages that lead somewhere -------------------------------------------------------------

TEST(Harden, WeightOverMaxAllocationSaysItCannotBePlaced) {
  auto m = model::Model::load(stories());
  auto o = vk_opts();
  o.max_allocation = 100000;  // token_embd / output are 131,072 bytes
  graph::Graph g = m->build_graph({1, 0, 16, model::Logits::LAST});
  try {
    runtime::Session s(*m, std::make_unique<vulkan::VulkanBackend>(o), {16, 512});
    FAIL() << "expected an error";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, ".weight: the tensor (131072 bytes")) << msg;
    EXPECT_TRUE(contains(msg, "cannot be placed on this device")) << msg;
    EXPECT_TRUE(contains(msg, "maxMemoryAllocationSize")) << msg;
    EXPECT_TRUE(contains(msg, "quantization")) << msg;
    EXPECT_FALSE(contains(msg, "-ub")) << msg;
  }
}

TEST(Harden, ContextAboveTrainingLengthWarns) {
  auto r = run_rocky("harden-ctx", {"run", "-m", stories(), "-p", "Once", "-n", "2", "--device", "cpu", "-c", "4096"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "warning: -c 4096 is above the model's context_length 2048")) << r.err;
  r = run_rocky("harden-ctx", {"run", "-m", stories(), "-p", "Once", "-n", "2", "--device", "cpu", "-c", "2048"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(contains(r.err, "warning")) << r.err;
}

TEST(Harden, VerifyTakesUbatchSize) {
  for (const char* flag : {"-ub", "--ub", "--ubatch-size"}) {
    auto r = run_rocky("harden-verify-ub", {"verify", "-m", stories(), flag, "5"});
    EXPECT_EQ(r.rc, 0) << flag << "\n" << r.out << r.err;
    EXPECT_TRUE(contains(r.out, "26 tokens in ubatches of 5")) << r.out;
    EXPECT_TRUE(contains(r.out, "top-1 agreement   26/26")) << r.out;
  }
  auto bad = run_rocky("harden-verify-ub", {"verify", "-m", stories(), "-ub", "0"});
  EXPECT_EQ(bad.rc, 2) << bad.err;
  EXPECT_FALSE(contains(bad.err, "not expected")) << bad.err;
}

TEST(Harden, BpeVocabularyLabelledLlamaIsRefused) {
  const std::string model = scratch_dir("harden-bpe") + "/qwen2-labelled-llama.gguf";
  rewrite_gguf(
      shared_path("reference/models/synth/synth-qwen2-0.5b-shape-q4_k_m.gguf"), model,
      [](std::string_view key, const gguf::Value&, gguf::Writer& w) {
        if (key != "tokenizer.ggml.model") return true;
        w.set_string(key, "llama");
        return false;
      },
      nullptr);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"tokenize", "-m", model, "-p", "Hello world"},
        std::vector<std::string>{"run", "-m", model, "-p", "Hello world", "-n", "1", "--device", "cpu"}}) {
    auto r = run_rocky("harden-bpe", args);
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    EXPECT_TRUE(contains(r.err, "'tokenizer.ggml.model' = 'llama' (SentencePiece)")) << r.err;
    EXPECT_TRUE(contains(r.err, "byte-level BPE")) << r.err;
    EXPECT_TRUE(contains(r.err, "expected 'gpt2'")) << r.err;
  }
}

// ---- 7. rocky synth cleans up --------------------------------------------------------------------

TEST(Harden, SynthRemovesPartOnSigintAndSigterm) {
  const std::string dir = scratch_dir("harden-synth-signal");
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string out = dir + "/big.gguf", part = out + ".part";
    std::filesystem::remove(out);
    std::filesystem::remove(part);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
      // 1.1 GB of f32: still being written when the signal arrives.
      ::execl(ROCKY_BINARY_DIR "/rocky", "rocky", "synth", "--preset", "qwen2.5-1.5b", "--type", "f32", "--layers", "1",
              "-t", "1", "-q", "-o", out.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    bool started = false;
    for (int i = 0; i < 1200 && !started; ++i) {
      std::error_code ec;
      started = std::filesystem::exists(part, ec) && std::filesystem::file_size(part, ec) > 1000000;
      if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(started) << "synth did not start writing " << part;
    ::kill(pid, sig);
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == sig) << "status " << st;
    EXPECT_FALSE(std::filesystem::exists(part)) << "signal " << sig;
    EXPECT_FALSE(std::filesystem::exists(out)) << "signal " << sig;
  }
}

TEST(Harden, SynthRefusesUpFrontWhenTheDiskIsTooSmall) {
  const std::string dir = scratch_dir("harden-synth-disk");
  struct statvfs st {};
  ASSERT_EQ(::statvfs(dir.c_str(), &st), 0);
  const double free_gb = double(st.f_bavail) * double(st.f_frsize) / 1e9;
  // Qwen2.5-7B's shapes, 1024 layers of f32: about 950 GB.
  ASSERT_LT(free_gb, 900.0) << "the scratch disk is too large for this test";
  const std::string out = dir + "/huge.gguf";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_rocky("harden-synth-disk",
                     {"synth", "--preset", "qwen2.5-7b", "--type", "f32", "--layers", "1024", "-q", "-o", out});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "but " + dir + " has only")) << r.err;
  EXPECT_TRUE(contains(r.err, "free")) << r.err;
  EXPECT_LT(s, 60.0);
  EXPECT_FALSE(std::filesystem::exists(out + ".part"));
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace rocky
