// add — shaders/add.comp: elementwise over n elements; also the shared binary_elementwise dispatch.
#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"

namespace rocky::vulkan::ops {

void binary_elementwise(Env& e, const char* shader, Region a, Region b, uint32_t ne0, uint64_t n, Region out,
                        const std::string& label) {
  const Pipeline& p = e.pipes.get(shader, {{ROCKY_SC_WG, e.wg}});
  Bound bs[] = {bind(e, a, false), bind(e, b, false), bind(e, out, true)};
  abi::BinaryPC pc{static_cast<uint32_t>(n), ne0, f32_off(bs[0]), f32_off(bs[1]), f32_off(bs[2])};
  auto g = e.rec.grid_1d((n + e.wg - 1) / e.wg);
  e.rec.dispatch(p, bs, &pc, sizeof pc, g[0], g[1], 1, label);
}

void add(Env& e, Region a, Region b, uint64_t n, Region out, const std::string& label) {
  binary_elementwise(e, "add", a, b, 0, n, out, label);
}

}  // namespace rocky::vulkan::ops
