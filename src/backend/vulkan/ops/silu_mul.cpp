// silu_mul — shaders/silu_mul.comp: elementwise over n elements.
#include "backend/vulkan/ops/ops.hpp"

namespace rocky::vulkan::ops {

void silu_mul(Env& e, Region a, Region b, uint64_t n, Region out, const std::string& label) {
  binary_elementwise(e, "silu_mul", a, b, 0, n, out, label);
}

}  // namespace rocky::vulkan::ops
