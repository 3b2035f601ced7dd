// Slot files (src/runtime/slot_file.cpp, rocky serve --slot-save-path): arbitrary bytes through
// decode_slot_file, and valid files built from the input with one byte changed or cut short (a
// random file seldom gets past the header checksum). Each input is decoded or refused with a
// SlotFileError carrying a message; a decoded file must encode back to the same bytes. The same
// bytes as a file name through valid_slot_filename: an accepted name never leaves the directory.
// Anything else (another exception, a crash, a sanitizer report) fails the run.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/slot_file.hpp"

using namespace rocky::runtime;

namespace {
CacheIdentity identity(bool hybrid) {
  CacheIdentity id;
  id.model = 0x1234abcdull;
  id.kv_type = 1;
  id.n_layer = 2;
  id.n_embd_kv = 4;
  id.kv_bytes_per_pos = 2 * 2 * 4 * 2;  // K and V, 2 layers, 4 f16 values
  id.state_bytes = hybrid ? 48 : 0;
  return id;
}

void decode(const std::vector<uint8_t>& bytes, const CacheIdentity& id) {
  try {
    const SlotState s = decode_slot_file(bytes, id, 1000, 64);
    if (s.kv.size() != s.tokens.size() * id.kv_bytes_per_pos) std::abort();
    if (encode_slot_file(s, id) != bytes) std::abort();
  } catch (const SlotFileError& e) {
    if (std::strlen(e.what()) == 0) std::abort();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool hybrid = data[0] & 1;
  const CacheIdentity id = identity(hybrid);
  const std::vector<uint8_t> raw(data + 1, data + size);
  decode(raw, id);

  // A valid file of up to 80 tokens from the input (some past the vocabulary or the context),
  // then damaged: byte `at` xor `x`, or cut at `at`.
  if (size >= 6) {
    SlotState s;
    const size_t n = data[1] % 80;
    for (size_t i = 0; i < n; ++i) s.tokens.push_back(static_cast<int32_t>(data[(2 + i) % size]) * 4 + (data[0] >> 7));
    s.kv.assign(n * id.kv_bytes_per_pos, data[2]);
    if (n > 0) s.state.assign(id.state_bytes, data[3]);
    std::vector<uint8_t> file = encode_slot_file(s, id);
    decode(file, id);
    const size_t at = (size_t(data[4]) << 8 | data[5]) % (file.size() + 1);
    if (data[0] & 2) {
      file.resize(at);
    } else if (at < file.size()) {
      file[at] ^= static_cast<uint8_t>(data[size - 1] | 1);
    }
    decode(file, id);
  }

  const std::string name(reinterpret_cast<const char*>(data), size);
  if (valid_slot_filename(name) && (name.find('/') != std::string::npos || name.find("..") != std::string::npos ||
                                    name.find('\0') != std::string::npos || name == "."))
    std::abort();
  return 0;
}
