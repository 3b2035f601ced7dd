// The one backend factory: run, verify, bench and the server make their backends here, by device
// name ("cpu", "vulkan[:N]", "auto") and options. A backend is shared by any number of contexts
// (backend/backend.hpp); the result converts to std::shared_ptr for that.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "runtime/options.hpp"

namespace rocky::runtime {

struct BackendOptions {
  std::string device = "auto";  // cpu | vulkan | vulkan:N | auto (the first Vulkan GPU, else the CPU, said on stderr)
  // The options below are the Vulkan backend's (the CPU backend ignores them).
  std::string matmul = "auto";  // prefill matmul kernels: auto | mmq | mm | basic (--matmul)
  bool profile = false;         // per-dispatch GPU times (Context::stats().ops; slows the run)
  bool kv_f16 = true;           // f16 KV cache (llama.cpp's default; -ctk/-ctv f32 turns it off)
  bool validation = false;      // validation layer + synchronization validation
  uint64_t max_binding = 0;     // cap one storage binding at BYTES (0 = the device limit)
  // Non-empty: the caller needs a Vulkan device ("bench --profile"); landing on the CPU is then a
  // rocky::Error "<vulkan_for> needs a Vulkan device".
  std::string vulkan_for;
  // The program's environment (read_env at its boundary): ROCKY_* lab overrides (they win over the
  // fields above), the pipeline cache directory, the loader, XDG_RUNTIME_DIR. Default: none.
  EnvOptions env;
};

// rocky::Error naming the device and the accepted names when o.device is unknown, or naming
// --matmul when o.matmul is not one of its values.
std::unique_ptr<backend::Backend> make_backend(const BackendOptions& o);
// The driver a backend made here runs on, for records: "NVIDIA 560.35.03", "llvmpipe Mesa 22.3.6
// (LLVM 15.0.6)" (VkPhysicalDeviceDriverProperties' name and info); "cpu" for the CPU backend.
std::string backend_driver(const backend::Backend& b);

// The same with o.device = device (the older spelling).
std::unique_ptr<backend::Backend> make_backend(const std::string& device, BackendOptions o = {});

}  // namespace rocky::runtime
