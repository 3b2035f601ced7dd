// Backend selection by device name ("cpu"; the Vulkan backend adds "vulkan[:N]" here).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.hpp"

namespace rocky::runtime {

// rocky::Error naming the device and the accepted names when `device` is unknown.
std::unique_ptr<backend::Backend> make_backend(const std::string& device);

}  // namespace rocky::runtime
