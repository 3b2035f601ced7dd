// gelu_mul — shaders/gelu_mul.comp (GeGLU, elementwise over n elements); scale —
// shaders/scale.comp (out = a · s).
#include <cstring>

#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"

namespace rocky::vulkan::ops {

void gelu_mul(Env& e, Region a, Region b, uint64_t n, Region out, const std::string& label) {
  binary_elementwise(e, "gelu_mul", a, b, 0, n, out, label);
}

void scale(Env& e, Region a, float s, uint64_t n, Region out, const std::string& label) {
  const Pipeline& p = e.pipes.get("scale", {{ROCKY_SC_WG, e.wg}});
  Bound bs[] = {bind(e, a, false), bind(e, out, true)};
  uint32_t bits = 0;
  std::memcpy(&bits, &s, 4);
  abi::BinaryPC pc{static_cast<uint32_t>(n), bits, f32_off(bs[0]), 0, f32_off(bs[1])};
  auto g = e.rec.grid_1d((n + e.wg - 1) / e.wg);
  e.rec.dispatch(p, bs, &pc, sizeof pc, g[0], g[1], 1, label);
}

}  // namespace rocky::vulkan::ops
