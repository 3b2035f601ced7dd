// Slot files (see slot_file.hpp): the header and payload of one slot's saved sequence, written
// whole or not at all, read back with every field checked before anything is used.
#include "runtime/slot_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace rocky::runtime {

namespace {
constexpr char k_magic[8] = {'R', 'K', 'Y', 'S', 'L', 'O', 'T', '1'};
constexpr uint32_t k_version = 1;

struct SlotHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;  // sizeof(SlotHeader)
  uint64_t model;         // CacheIdentity::model
  uint64_t identity;      // CacheIdentity::hash()
  uint32_t kv_type;
  int32_t n_layer;
  int32_t n_embd_kv;
  int32_t n_tokens;
  uint64_t kv_bytes_per_pos;
  uint64_t kv_bytes, state_bytes;
  uint64_t payload_bytes;     // 4 · n_tokens + kv_bytes + state_bytes
  uint64_t payload_checksum;  // hash64 of the payload
  uint64_t header_checksum;   // hash64 of every byte before this field
};
static_assert(sizeof(SlotHeader) == 96, "SlotHeader has no padding");

[[noreturn]] void bad(const std::string& why) { throw SlotFileError(why); }
}  // namespace

std::vector<uint8_t> encode_slot_file(const SlotState& s, const CacheIdentity& id) {
  SlotHeader h{};
  std::memcpy(h.magic, k_magic, sizeof k_magic);
  h.version = k_version;
  h.header_bytes = sizeof(SlotHeader);
  h.model = id.model;
  h.identity = id.hash();
  h.kv_type = id.kv_type;
  h.n_layer = id.n_layer;
  h.n_embd_kv = id.n_embd_kv;
  h.n_tokens = static_cast<int32_t>(s.tokens.size());
  h.kv_bytes_per_pos = id.kv_bytes_per_pos;
  h.kv_bytes = s.kv.size();
  h.state_bytes = s.state.size();
  h.payload_bytes = s.tokens.size() * 4 + s.kv.size() + s.state.size();
  std::vector<uint8_t> buf(sizeof(SlotHeader) + h.payload_bytes);
  uint8_t* pl = buf.data() + sizeof(SlotHeader);
  if (!s.tokens.empty()) std::memcpy(pl, s.tokens.data(), s.tokens.size() * 4);
  if (!s.kv.empty()) std::memcpy(pl + s.tokens.size() * 4, s.kv.data(), s.kv.size());
  if (!s.state.empty()) std::memcpy(pl + s.tokens.size() * 4 + s.kv.size(), s.state.data(), s.state.size());
  h.payload_checksum = hash64(pl, static_cast<size_t>(h.payload_bytes));
  std::memcpy(buf.data(), &h, sizeof h);
  h.header_checksum = hash64(buf.data(), offsetof(SlotHeader, header_checksum));
  std::memcpy(buf.data(), &h, sizeof h);
  return buf;
}

SlotState decode_slot_file(std::span<const uint8_t> bytes, const CacheIdentity& id, int32_t n_vocab,
                           int32_t max_tokens) {
  if (bytes.size() < sizeof(SlotHeader))
    bad(fmt::format("truncated: {} bytes, shorter than the {}-byte header", bytes.size(), sizeof(SlotHeader)));
  SlotHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, k_magic, sizeof k_magic) != 0) bad("not a rocky slot file (bad magic)");
  if (hash64(bytes.data(), offsetof(SlotHeader, header_checksum)) != h.header_checksum)
    bad("header checksum mismatch (the file is damaged)");
  if (h.version != k_version) bad(fmt::format("format version {} (this rocky reads {})", h.version, k_version));
  if (h.header_bytes != sizeof(SlotHeader))
    bad(fmt::format("header size {} (expected {})", h.header_bytes, sizeof(SlotHeader)));
  if (h.kv_type != id.kv_type || h.n_layer != id.n_layer || h.n_embd_kv != id.n_embd_kv ||
      h.kv_bytes_per_pos != id.kv_bytes_per_pos)
    bad(
        fmt::format("saved with another KV layout: type {}, {} layers × {}, {} bytes per position (this server: type "
                    "{}, {} layers × {}, {} bytes per position)",
                    h.kv_type, h.n_layer, h.n_embd_kv, h.kv_bytes_per_pos, id.kv_type, id.n_layer, id.n_embd_kv,
                    id.kv_bytes_per_pos));
  if (h.model != id.model) bad("saved by a server running another model (its identity differs)");
  if (h.identity != id.hash()) bad("saved with another model or KV identity (the identity hash differs)");
  if (h.n_tokens < 0) bad(fmt::format("token count {} is negative", h.n_tokens));
  if (h.n_tokens > max_tokens)
    bad(fmt::format("holds {} tokens, more than this slot's context of {} positions", h.n_tokens, max_tokens));
  const uint64_t n = static_cast<uint64_t>(h.n_tokens);
  if (h.kv_bytes != id.kv_bytes_per_pos * n)
    bad(fmt::format("K/V length {} (expected {} for {} tokens)", h.kv_bytes, id.kv_bytes_per_pos * n, n));
  const uint64_t want_state = n > 0 ? id.state_bytes : 0;
  if (h.state_bytes != want_state)
    bad(fmt::format("recurrent state length {} (this model's state has {} bytes)", h.state_bytes, want_state));
  if (h.payload_bytes != n * 4 + h.kv_bytes + h.state_bytes) bad("payload length does not add up");
  if (bytes.size() - sizeof(SlotHeader) != h.payload_bytes)
    bad(fmt::format("truncated or padded: payload of {} bytes, the header says {}", bytes.size() - sizeof(SlotHeader),
                    h.payload_bytes));
  const uint8_t* pl = bytes.data() + sizeof(SlotHeader);
  if (hash64(pl, static_cast<size_t>(h.payload_bytes)) != h.payload_checksum)
    bad("payload checksum mismatch (the file is damaged)");
  SlotState s;
  s.tokens.resize(static_cast<size_t>(n));
  if (n > 0) std::memcpy(s.tokens.data(), pl, static_cast<size_t>(n) * 4);
  for (size_t i = 0; i < s.tokens.size(); ++i)
    if (s.tokens[i] < 0 || s.tokens[i] >= n_vocab)
      bad(fmt::format("token {} at position {} is outside the vocabulary (0 .. {})", s.tokens[i], i, n_vocab - 1));
  pl += n * 4;
  s.kv.assign(pl, pl + h.kv_bytes);
  pl += h.kv_bytes;
  s.state.assign(pl, pl + h.state_bytes);
  return s;
}

uint64_t write_slot_file(const std::string& path, const SlotState& s, const CacheIdentity& id) {
  const std::vector<uint8_t> buf = encode_slot_file(s, id);
  static std::atomic<uint64_t> counter{0};
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string(".") : path.substr(0, slash);
  const std::string tmp = fmt::format("{}/.tmp-slot-{}-{}", dir, ::getpid(), counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  int err = fd < 0 ? errno : 0;
  size_t done = 0;
  while (fd >= 0 && err == 0 && done < buf.size()) {
    const ssize_t w = ::write(fd, buf.data() + done, buf.size() - done);
    if (w < 0) {
      if (errno != EINTR) err = errno;
    } else {
      done += static_cast<size_t>(w);
    }
  }
  if (fd >= 0 && ::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw SlotFileError(fmt::format("cannot write {}: {}", path, std::strerror(err)));
  }
  return buf.size();
}

SlotState read_slot_file(const std::string& path, const CacheIdentity& id, int32_t n_vocab, int32_t max_tokens,
                         uint64_t* n_read) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw SlotFileError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  struct stat sb {};
  std::vector<uint8_t> bytes;
  int err = ::fstat(fd, &sb) == 0 ? 0 : errno;
  if (err == 0 && !S_ISREG(sb.st_mode)) err = EISDIR;
  // No file this slot could hold is larger: a huge one is refused before it is read.
  const uint64_t limit =
      sizeof(SlotHeader) + uint64_t(std::max(max_tokens, 0)) * (4 + id.kv_bytes_per_pos) + id.state_bytes;
  if (err == 0 && static_cast<uint64_t>(sb.st_size) > limit) {
    ::close(fd);
    throw SlotFileError(fmt::format("{}: {} bytes, larger than any state of this slot ({} bytes at most)", path,
                                    static_cast<uint64_t>(sb.st_size), limit));
  }
  if (err == 0) {
    bytes.resize(static_cast<size_t>(sb.st_size));
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t r = ::read(fd, bytes.data() + got, bytes.size() - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        err = r < 0 ? errno : EIO;
        break;
      }
      got += static_cast<size_t>(r);
    }
  }
  ::close(fd);
  if (err != 0) throw SlotFileError(fmt::format("cannot read {}: {}", path, std::strerror(err)));
  if (n_read) *n_read = bytes.size();
  try {
    return decode_slot_file(bytes, id, n_vocab, max_tokens);
  } catch (const SlotFileError& e) {
    throw SlotFileError(fmt::format("{}: {}", path, e.what()));
  }
}

bool valid_slot_filename(const std::string& name) {
  if (name.empty() || name.size() > 255) return false;
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f || std::strchr("/\\:*?\"<>|", c) != nullptr) return false;
  if (name.front() == ' ' || name.back() == ' ' || name.back() == '.') return false;
  return name.find("..") == std::string::npos && name != ".";
}

}  // namespace rocky::runtime
