// rocky::Error — the one exception type rocky throws for bad input and failed operations.
//
// Errors carry their full context in the message ("model.gguf: tensor blk.3.ffn_up.weight: data
// offset 0x1234 past end of file (size 4096)") and are surfaced once, at the program boundary
// (apps/cli/main.cpp maps them to exit code 1). Programming errors (broken invariants) use assert.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace rocky {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(printable(what)) {}

  // Control bytes of a message (a GGUF string with a NUL in it, an escape sequence) as \xNN: what()
  // is a C string, so a NUL would cut the message where the bad value starts. Newlines and tabs stay.
  static std::string printable(const std::string& s) {
    std::string o;
    o.reserve(s.size());
    for (const char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f)
        o += fmt::format("\\x{:02x}", u);
      else
        o += c;
    }
    return o;
  }
};

// Out of device or host memory; the message names the allocation and suggests a fix.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// The device stopped answering (VK_ERROR_DEVICE_LOST): what it held is gone, so the context that
// was computing must be made again (the server fails that step's requests with 503 and rebuilds).
class DeviceLostError : public Error {
 public:
  using Error::Error;
};

// A failure of the device rather than of the request: out of device memory or a lost device. The
// server answers it with 503 and recovers (runtime/scheduler.cpp).
inline bool is_device_fault(const std::exception& e) {
  return dynamic_cast<const OutOfMemoryError*>(&e) != nullptr || dynamic_cast<const DeviceLostError*>(&e) != nullptr;
}

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace rocky
