// take_cols — shaders/take_cols.comp: copy a column range.
#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"

namespace rocky::vulkan::ops {

void take_cols(Env& e, Region x, uint32_t ne0, uint32_t first_col, uint32_t n_cols, Region out,
               const std::string& label) {
  const Pipeline& p = e.pipes.get("take_cols", {{ROCKY_SC_WG, e.wg}});
  Bound b[] = {bind(e, x, false), bind(e, out, true)};
  abi::TakeColsPC pc{ne0, n_cols, first_col, f32_off(b[0]), f32_off(b[1])};
  e.rec.dispatch(p, b, &pc, sizeof pc, (ne0 + e.wg - 1) / e.wg, n_cols, 1, label);
}

}  // namespace rocky::vulkan::ops
