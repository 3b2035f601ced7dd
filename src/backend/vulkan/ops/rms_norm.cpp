// rms_norm — shaders/rms_norm.comp: one workgroup per column.
#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"

namespace rocky::vulkan::ops {

void rms_norm(Env& e, Region x, Region w, uint32_t ne0, uint32_t n_cols, float eps, Region out, const std::string& label) {
  const Pipeline& p = e.pipes.get("rms_norm", {{ROCKY_SC_WG, e.wg}});
  Bound b[] = {bind(e, x, false), bind(e, w, false), bind(e, out, true)};
  abi::RmsNormPC pc{ne0, n_cols, f32_off(b[0]), f32_off(b[1]), f32_off(b[2]), eps};
  e.rec.dispatch(p, b, &pc, sizeof pc, n_cols, 1, 1, label);
}

}  // namespace rocky::vulkan::ops
