// Backend selection by device name ("cpu"; the Vulkan backend adds "vulkan[:N]" here).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.hpp"

namespace rocky::runtime {

// Options the Vulkan backend takes from the command line (ignored by the CPU backend).
struct BackendOptions {
  std::string matmul = "auto";  // prefill matmul kernels: auto | mmq | mm | basic (--matmul)
};

// rocky::Error naming the device and the accepted names when `device` is unknown, or naming
// --matmul when `o.matmul` is not one of its values.
std::unique_ptr<backend::Backend> make_backend(const std::string& device, const BackendOptions& o = {});

}  // namespace rocky::runtime
