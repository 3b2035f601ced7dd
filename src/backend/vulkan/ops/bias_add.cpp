// bias_add — shaders/bias_add.comp: out = a + bias broadcast over columns.
#include "backend/vulkan/ops/ops.hpp"

namespace rocky::vulkan::ops {

void bias_add(Env& e, Region a, Region bias, uint32_t ne0, uint64_t n, Region out, const std::string& label) {
  binary_elementwise(e, "bias_add", a, bias, ne0, n, out, label);
}

}  // namespace rocky::vulkan::ops
