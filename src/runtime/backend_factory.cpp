// Backend factory (see backend_factory.hpp).
#include "runtime/backend_factory.hpp"

#include "backend/cpu/cpu_backend.hpp"
#include "core/error.hpp"

namespace rocky::runtime {

std::unique_ptr<backend::Backend> make_backend(const std::string& device) {
  if (device == "cpu") return backend::cpu::make_cpu_backend();
  fail("unknown device '{}' (accepted: cpu)", device);
}

}  // namespace rocky::runtime
