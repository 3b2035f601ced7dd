#include "synth/stream_writer.hpp"

#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/error.hpp"

namespace rocky::synth {
namespace {

constexpr uint64_t k_chunk_elems = uint64_t{16} << 20;  // elements per chunk (f32: 64 MiB)

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

class File {
 public:
  explicit File(std::string path) : path_(std::move(path)) {
    f_ = std::fopen(path_.c_str(), "wb");
    if (!f_) fail("{}: cannot create: {}", path_, std::strerror(errno));
  }
  ~File() {
    if (f_) std::fclose(f_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  void write(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) fail("{}: write failed: {}", path_, std::strerror(errno));
    written_ += n;
  }
  void zeros(size_t n) {
    static const uint8_t k_zero[64] = {};
    while (n) {
      const size_t k = std::min(n, sizeof k_zero);
      write(k_zero, k);
      n -= k;
    }
  }
  void close() {
    const int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) fail("{}: close failed: {}", path_, std::strerror(errno));
  }
  uint64_t written() const { return written_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  uint64_t written_ = 0;
};

// On a terminal: a bar redrawn at most every 100 ms. Otherwise (logs): one line per 10 %.
class ProgressBar {
 public:
  ProgressBar(bool on, std::string label, uint64_t total)
      : on_(on), tty_(isatty(STDERR_FILENO) != 0), label_(std::move(label)), total_(std::max<uint64_t>(total, 1)) {}
  void update(uint64_t done, const std::string& what, bool force = false) {
    if (!on_) return;
    const double frac = static_cast<double>(done) / static_cast<double>(total_);
    const int pct = static_cast<int>(frac * 100);
    if (!tty_) {
      if (pct / 10 > last_decile_ || (force && pct != last_pct_)) {
        last_decile_ = pct / 10;
        last_pct_ = pct;
        std::fprintf(stderr, "%s: %3d%% %.1f/%.1f MiB %s\n", label_.c_str(), pct, done / 1048576.0, total_ / 1048576.0,
                     what.c_str());
      }
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const int width = 30, fill = static_cast<int>(frac * width);
    std::fprintf(stderr, "\r%s [%s%s] %3d%% %7.1f/%.1f MiB %-32.32s", label_.c_str(), std::string(fill, '#').c_str(),
                 std::string(width - fill, '.').c_str(), pct, done / 1048576.0, total_ / 1048576.0, what.c_str());
    std::fflush(stderr);
  }
  void finish() {
    if (on_ && tty_) std::fprintf(stderr, "\n");
  }

 private:
  bool on_, tty_;
  std::string label_;
  uint64_t total_;
  int last_decile_ = 0, last_pct_ = -1;
  std::chrono::steady_clock::time_point last_{};
};

// SIGINT/SIGTERM while OUT.part is being written: remove it, then die of the signal as before.
// The path lives in a fixed buffer (a handler may only call async-signal-safe functions).
char g_part[4096];
void on_signal(int sig) {
  if (g_part[0] != '\0') ::unlink(g_part);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

class PartCleanup {
 public:
  explicit PartCleanup(const std::string& part) {
    if (part.size() >= sizeof g_part) return;  // no handler for such a path; the catch still removes it
    std::memcpy(g_part, part.c_str(), part.size() + 1);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < 2; ++k) installed_[k] = ::sigaction(k_signals[k], &sa, &old_[k]) == 0;
  }
  ~PartCleanup() {
    for (size_t k = 0; k < 2; ++k)
      if (installed_[k]) ::sigaction(k_signals[k], &old_[k], nullptr);
    g_part[0] = '\0';
  }
  PartCleanup(const PartCleanup&) = delete;
  PartCleanup& operator=(const PartCleanup&) = delete;

 private:
  static constexpr int k_signals[2] = {SIGINT, SIGTERM};
  struct sigaction old_[2]{};
  bool installed_[2] = {false, false};
};

std::string mib(uint64_t b) { return fmt::format("{:.1f} MiB", static_cast<double>(b) / 1048576.0); }

// Runs encode over [row0, row1) split into `threads` contiguous pieces.
void encode_parallel(const RowEncoder& encode, size_t index, uint64_t row0, uint64_t row1, uint64_t row_size,
                     uint8_t* dst, unsigned threads) {
  const uint64_t n = row1 - row0;
  const unsigned t = static_cast<unsigned>(std::min<uint64_t>(threads, n));
  if (t <= 1) {
    encode(index, row0, row1, dst);
    return;
  }
  std::vector<std::thread> pool;
  std::exception_ptr err;
  std::mutex mu;
  for (unsigned k = 0; k < t; ++k) {
    const uint64_t a = row0 + n * k / t, b = row0 + n * (k + 1) / t;
    pool.emplace_back([&, a, b] {
      try {
        encode(index, a, b, dst + (a - row0) * row_size);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!err) err = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  if (err) std::rethrow_exception(err);
}

}  // namespace

uint64_t write_streaming(const std::string& path, const gguf::Writer& meta, const std::vector<StreamTensor>& tensors,
                         const RowEncoder& encode, const StreamOptions& opt) {
  // OUT.part is renamed onto OUT at the end: fail now, not after writing gigabytes, when OUT is a
  // directory (or no path at all).
  std::error_code dir_ec;
  if (path.empty()) fail("the output file name is empty");
  if (std::filesystem::is_directory(path, dir_ec)) fail("{}: is a directory, not an output file", path);
  const uint64_t align = meta.alignment();
  // Header + metadata from the writer (it holds no tensors, so it ends right after the metadata);
  // the tensor count at byte 8 is patched, the infos appended.
  std::vector<uint8_t> head = meta.to_bytes();
  if (head.size() < 24) fail("{}: internal error: GGUF header of {} bytes", path, head.size());
  const uint64_t n_tensors = tensors.size();
  std::memcpy(head.data() + 8, &n_tensors, sizeof n_tensors);
  std::vector<uint64_t> offsets;
  uint64_t off = 0, total = 0;
  for (const StreamTensor& t : tensors) {
    const auto info = dtype_info(static_cast<uint32_t>(t.type));
    if (!info || t.ne[0] % info->block_elems != 0 || t.n_dims < 1 || t.n_dims > 4)
      fail("{}: tensor '{}': bad type or shape", path, t.name);
    put<uint64_t>(head, t.name.size());
    head.insert(head.end(), t.name.begin(), t.name.end());
    put<uint32_t>(head, t.n_dims);
    for (uint32_t d = 0; d < t.n_dims; ++d) put<uint64_t>(head, t.ne[d]);
    put<uint32_t>(head, static_cast<uint32_t>(t.type));
    put<uint64_t>(head, off);
    offsets.push_back(off);
    off = align_up(off + t.n_bytes(), align);
    total += t.n_bytes();
  }
  if (!tensors.empty()) head.resize(align_up(head.size(), align), 0);

  const std::string part = path + ".part";
  // Refuse up front, not after writing gigabytes, when the file would not fit on its disk (OUT.part
  // is written beside OUT; an existing OUT is replaced only at the end, so its space does not count).
  const uint64_t file_bytes = head.size() + (tensors.empty() ? 0 : off);
  {
    std::filesystem::path dir = std::filesystem::path(part).parent_path();
    if (dir.empty()) dir = ".";
    struct statvfs st {};
    if (::statvfs(dir.c_str(), &st) == 0) {
      const uint64_t avail = uint64_t(st.f_bavail) * uint64_t(st.f_frsize);
      if (avail < file_bytes) {
        fail("{}: the model needs {} bytes ({}) but {} has only {} free; free some space or write elsewhere (-o)", path,
             file_bytes, mib(file_bytes), dir.string(), mib(avail));
      }
    }
  }
  const unsigned threads = opt.threads ? opt.threads : std::max(1u, std::thread::hardware_concurrency());
  PartCleanup cleanup(part);
  try {
    File f(part);
    f.write(head.data(), head.size());
    const uint64_t data_start = f.written();
    ProgressBar bar(opt.progress, opt.label, total);
    uint64_t done = 0;
    std::vector<uint8_t> buf;
    for (size_t k = 0; k < tensors.size(); ++k) {
      const StreamTensor& t = tensors[k];
      f.zeros(data_start + offsets[k] - f.written());
      const uint64_t rb = row_bytes(t.type, t.ne[0]);
      const uint64_t rows = t.rows();
      const uint64_t chunk_rows = std::max<uint64_t>(1, k_chunk_elems / t.ne[0]);
      for (uint64_t r = 0; r < rows; r += chunk_rows) {
        const uint64_t r1 = std::min(rows, r + chunk_rows);
        buf.resize((r1 - r) * rb);
        encode_parallel(encode, k, r, r1, rb, buf.data(), threads);
        f.write(buf.data(), buf.size());
        done += buf.size();
        bar.update(done, t.name);
      }
    }
    if (!tensors.empty()) f.zeros(align_up(f.written() - data_start, align) - (f.written() - data_start));
    bar.update(done, "done", true);
    bar.finish();
    const uint64_t size = f.written();
    f.close();
    std::error_code ec;
    std::filesystem::rename(part, path, ec);
    if (ec) fail("{}: cannot rename {} to it: {}", path, part, ec.message());
    return size;
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(part, ec);
    throw;
  }
}

}  // namespace rocky::synth
