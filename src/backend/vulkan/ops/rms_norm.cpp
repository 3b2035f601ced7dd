// rms_norm — shaders/rms_norm.comp: one workgroup per column; up to k_vec_cols columns (the
// decode token, a multi-sequence step's decode tokens) whose ne0 and offsets are multiples of 4
// go to shaders/rms_norm_vec.comp (x in registers, vec4 loads, a two-pass shared reduction: one
// short workgroup per column instead of a barrier tree).
#include <algorithm>

#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "backend/vulkan/shaders/fast_abi.h"

namespace rocky::vulkan::ops {

void rms_norm(Env& e, Region x, Region w, uint32_t ne0, uint32_t n_cols, float eps, Region out,
              const std::string& label) {
  Bound b[] = {bind(e, x, false), bind(e, w, false), bind(e, out, true)};
  abi::RmsNormPC pc{ne0, n_cols, f32_off(b[0]), f32_off(b[1]), f32_off(b[2]), eps};
  const uint32_t n4 = ne0 / 4;
  const uint32_t max_wg = std::min<uint32_t>(1024, e.info.max_workgroup_invocations);
  uint32_t wg = 32;
  while (wg < n4 && wg * 2 <= max_wg) wg *= 2;
  const uint32_t per = (n4 + wg - 1) / wg;
  constexpr uint32_t k_vec_cols = 8;  // a decode step's rows; prefill ubatches keep rms_norm.comp
  if (n_cols <= k_vec_cols && ne0 % 4 == 0 && pc.x_off % 4 == 0 && pc.w_off % 4 == 0 && pc.out_off % 4 == 0 &&
      max_wg >= 32 && per >= 1 && per <= 8) {
    const Pipeline& p = e.pipes.get("rms_norm_vec", {{ROCKY_SC_WG, wg}, {ROCKY_SC_RMS_PER, per}});
    e.rec.dispatch(p, b, &pc, sizeof pc, n_cols, 1, 1, label);
    return;
  }
  const Pipeline& p = e.pipes.get("rms_norm", {{ROCKY_SC_WG, e.wg}});
  e.rec.dispatch(p, b, &pc, sizeof pc, n_cols, 1, 1, label);
}

}  // namespace rocky::vulkan::ops
