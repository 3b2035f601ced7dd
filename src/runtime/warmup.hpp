// The server's warm-up (llama-server's, widened to the shapes an agent's turns meet): before the
// first request, a throwaway context on the slots' backend runs the kernels a request will, so the
// compute pipelines (created on first use: a big one costs ≈ 150 ms on the H200's driver, and the
// first turn at depth paid 1.2 s without this) exist and land in the pipeline cache file.
#pragma once

#include <cstdint>
#include <memory>

namespace rocky::model {
class Model;
}
namespace rocky::backend {
class Backend;
}

namespace rocky::runtime {

class Session;

// The depth shapes. The backend's profile has no field for its attention thresholds yet (the
// split-key flash attention starts at 1,024 keys, attention_decode's few-token ubatches at ≤ 8
// rows: src/backend/vulkan/ops/attention.cpp), so they are named here; a profile field, once it
// exists, replaces them.
inline constexpr int32_t k_warm_depth = 1280;      // the depth the short ubatches run at
inline constexpr int32_t k_warm_min_depth = 1088;  // below this context room: no depth shapes
inline constexpr int32_t k_warm_short = 48;        // a short ubatch (an agent's next message)
inline constexpr int32_t k_warm_tiny = 8;          // a few-token ubatch (attention_decode)

struct WarmupReport {
  int32_t n_prompt = 0;             // the first ubatch's tokens
  bool deep = false;                // the depth shapes ran
  int32_t n_short = 0, n_tiny = 0;  // their ubatches (deep only)
  int32_t depth = 0;                // at this depth (deep only)
  int32_t n_verify = 0;             // speculative verifications (2 … n_verify + 1 tokens)
  double ms = 0;                    // wall time of the whole warm-up
};

// One ubatch of min(n_ubatch, n_ctx − 1) copies of `token`; then, where n_ctx holds a depth of at
// least k_warm_min_depth after them, ubatches of min(k_warm_short, n_ubatch) and
// min(k_warm_tiny, n_ubatch) tokens at depth min(k_warm_depth, …) (zeros imported into the KV
// cache, not evaluated: not for recurrent models, whose state cannot be imported as zeros); then one
// decode step. The context is freed on return.
// With n_verify ≥ 2 (speculative decoding on): then speculative verifications of 2 … n_verify
// tokens (warm_verifications).
WarmupReport warm_up(const model::Model& m, const std::shared_ptr<backend::Backend>& be, int32_t token, int32_t n_ctx,
                     int32_t n_ubatch, int32_t n_verify = 0);

// Speculative verifications of every length 2 … n_verify (a token and its drafts, laid out as
// Session::eval_draft and the batched steps lay them) at the session's position, each dropped again:
// the kernels of every column count a verification can meet (the int8 matvec is specialised per
// count: ≈ 100 ms to create each on the H100's driver) exist before a request meets them in the
// middle of its decode. Returns how many ran (0 for a recurrent model, which does not speculate).
int32_t warm_verifications(Session& s, int32_t token, int32_t n_verify);

}  // namespace rocky::runtime
