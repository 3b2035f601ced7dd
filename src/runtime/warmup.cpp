#include "runtime/warmup.hpp"

#include <algorithm>
#include <chrono>
#include <span>
#include <vector>

#include "runtime/session.hpp"

namespace rocky::runtime {

int32_t warm_verifications(Session& s, int32_t token, int32_t n_verify) {
  if (s.recurrent()) return 0;
  const int32_t base = s.n_past();
  const int32_t top = std::min(n_verify, s.n_ctx() - base);
  const std::vector<int32_t> ids(static_cast<size_t>(std::max(top, 0)), token);
  std::vector<float> out;
  int32_t n = 0;
  for (int32_t k = 2; k <= top; ++k, ++n) {
    s.eval_draft(std::span<const int32_t>(ids).first(static_cast<size_t>(k)), out);
    s.truncate(base);
  }
  return n;
}

WarmupReport warm_up(const model::Model& m, const std::shared_ptr<backend::Backend>& be, int32_t token, int32_t n_ctx,
                     int32_t n_ubatch, int32_t n_verify) {
  const auto t0 = std::chrono::steady_clock::now();
  n_ctx = std::max<int32_t>(2, n_ctx);
  const int32_t ub = std::max<int32_t>(1, n_ubatch);
  WarmupReport r;
  const int32_t n = std::min<int32_t>(ub, n_ctx - 1);
  const int32_t n_short = std::min(k_warm_short, ub), n_tiny = std::min(k_warm_tiny, ub);
  const int32_t depth = std::min(k_warm_depth, n_ctx - n_short - n_tiny - 1);
  bool deep = depth >= k_warm_min_depth;
  const int32_t verify_room = std::max(std::min(n_verify, ub), 0);
  Session s(m, be, SessionOptions{(deep ? std::max(n + 1, depth + n_short + n_tiny + 1) : n + 1) + verify_room, ub});
  deep = deep && !s.recurrent();  // a hybrid model's state cannot be imported as zeros
  const std::vector<int32_t> ids(static_cast<size_t>(std::max(n, n_short)), token);
  const std::span<const int32_t> all(ids);
  s.eval(all.first(static_cast<size_t>(n)));
  if (deep) {
    s.reset();
    const std::vector<uint8_t> zeros(s.context().kv_export_bytes(depth), 0);
    s.import_kv(0, depth, zeros);
    s.eval(all.first(static_cast<size_t>(n_short)));
    s.eval(all.first(static_cast<size_t>(n_tiny)));
  }
  s.eval(all.first(1));
  r.n_verify = warm_verifications(s, token, verify_room);
  r.n_prompt = n;
  r.deep = deep;
  if (deep) {
    r.n_short = n_short;
    r.n_tiny = n_tiny;
    r.depth = depth;
  }
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace rocky::runtime
