// runtime/kv_memory: the KV a context holds by kind of layer equals what the backend allocated
// (CPU f32, Vulkan f16), gemma3's local layers counted as sliding-window, stories260K's as full;
// --kv-budget refuses a context over it before allocating, naming the budget.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "model/model.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/kv_memory.hpp"
#include "runtime/session.hpp"

namespace rocky {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void check(const std::string& model, const std::string& dev, bool has_swa) {
  SCOPED_TRACE(model + " on " + dev);
  auto m = model::Model::load(test::shared_path(model));
  runtime::BackendOptions bo;
  bo.device = dev;
  bo.kv_f16 = true;
  std::shared_ptr<backend::Backend> be = runtime::make_backend(bo);
  const int32_t n_ctx = 96;
  runtime::Session s(*m, be, runtime::SessionOptions{n_ctx, 64});
  runtime::KvBytes pt;
  const runtime::KvBytes b = runtime::kv_bytes(*m, n_ctx, 1, s.context().kv_type(), &pt);
  EXPECT_EQ(b.total(), s.context().stats().memory.kv);  // every byte the context holds, by kind
  EXPECT_EQ(b.full, pt.full * n_ctx);
  EXPECT_EQ(b.sliding_window, pt.sliding_window * n_ctx);
  EXPECT_GT(b.full, 0u);
  EXPECT_EQ(b.sliding_window > 0, has_swa);
  const auto& hp = m->hparams();
  int swa = 0;
  for (int il = 0; il < hp.n_layer; ++il) swa += hp.is_swa_layer(il) ? 1 : 0;
  const uint64_t el = s.context().kv_type() == backend::KvType::F16 ? 2 : 4;
  const uint64_t layer_pos = 2ull * uint64_t(s.context().kv().n_embd_kv) * el;
  EXPECT_EQ(pt.sliding_window, layer_pos * uint64_t(swa));
  EXPECT_EQ(pt.full, layer_pos * uint64_t(hp.n_layer - swa));
  // Two sequences: twice the cells.
  EXPECT_EQ(runtime::kv_bytes(*m, n_ctx, 2, s.context().kv_type()).total(), 2 * b.total());
}

TEST(KvMemory, Stories) {
  check("reference/models/stories260K.gguf", "cpu", false);
  check("reference/models/stories260K.gguf", "vulkan", false);
}

TEST(KvMemory, Gemma3) {
  check("reference/models/synth/synth-gemma3-q4_k_m.gguf", "cpu", true);
  check("reference/models/synth/synth-gemma3-q4_k_m.gguf", "vulkan", true);
}

TEST(KvMemory, Budget) {
  runtime::KvBytes need;
  need.full = 3ull << 20;
  need.sliding_window = 2ull << 20;
  EXPECT_NO_THROW(runtime::check_kv_budget(need, 0, "x"));
  EXPECT_NO_THROW(runtime::check_kv_budget(need, 5, "x"));
  const std::string e = error_of([&] { runtime::check_kv_budget(need, 4, "-c 4096"); });
  EXPECT_NE(e.find("--kv-budget 4 MiB"), std::string::npos) << e;
  EXPECT_NE(e.find("-c 4096 needs 5.0 MiB"), std::string::npos) << e;
  EXPECT_NE(e.find("sliding-window 2.0"), std::string::npos) << e;
}

}  // namespace
}  // namespace rocky
