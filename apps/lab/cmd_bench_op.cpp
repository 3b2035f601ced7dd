// rocky bench-op --type q4_K --shape M,N,K [--kernel mmq|mmq-nodot|mmv|mmv-q8] [--reps R] [--tune FILE]
//                [--no-roofline] [--pipeline-stats [--allow-spills]] [--json] [--device N]
// Times one prefill matrix product y[M, N] = W[K, M]ᵀ · x[K, N] (M = weight rows / output features,
// N = tokens, K = inner dimension; FLOP = 2·M·N·K) on random weights and activations, after a
// warm-up, best of R; checks 64 sampled outputs against a CPU f64 product of the same q8_1
// activations; prints GFLOPS and the % of the measured roofline (int8-dot and FP32 peaks).
// N = 1 (or --kernel mmv / mmv-q8) times a decode matvec instead: mmv = fast::matvec_mmq over
// the same repack with f32 x (N ≤ 8 columns; the default for N = 1), mmv-q8 = fast::matvec_q8 with
// q8_1 x (N ≤ 64; its quantize_q8_1 runs once per command buffer and is not timed). It checks 64
// sampled outputs against a CPU f64 product with the same x (f32, or the q8_1 values read back) and
// prints the bytes it reads (repack values + scales + x + y), GB/s and the % of the measured copy
// bandwidth, plus the GB/s of the weight's GGUF bytes (what a decode token moves in the model
// file's terms). It times the matvec as decode meets it: after ≥ 0.3 s of back-to-back
// dispatches (clocks up), 8 dispatches per command buffer, each reading another copy of the
// weight (copies ≥ 256 MiB in all, so the weights come from memory, not the L2 cache).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <vector>

#include "backend/vulkan/memory.hpp"
#include "backend/vulkan/ops/matmul_fast.hpp"
#include "backend/vulkan/pipeline_stats.hpp"
#include "backend/vulkan/roofline.hpp"
#include "cli/commands.hpp"
#include "lab/lab.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "quant/quant.hpp"

namespace rocky::lab {
using cli::process_env;
using cli::Runner;
using cli::vulkan_device_index;

namespace {

struct BenchOpts {
  std::string type = "q4_K";
  std::string shape = "4096,512,14336";
  std::string kernel = "mmq";
  std::string tune;
  uint32_t device = 0;
  uint32_t reps = 5;
  bool no_roofline = false;
  bool pipeline_stats = false;
  bool allow_spills = false;
  bool json = false;
};

DType parse_type(const std::string& s) {
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    std::string n(dtype_name(t));
    if (std::equal(n.begin(), n.end(), s.begin(), s.end(),
                   [](char a, char b) { return std::tolower(a) == std::tolower(b); }))
      return t;
  }
  fail("--type {}: expected one of q4_0, q8_0, q4_K, q6_K", s);
}

std::array<uint32_t, 3> parse_shape(const std::string& s) {
  std::array<uint32_t, 3> v{};
  std::stringstream ss(s);
  std::string part;
  for (int i = 0; i < 3; ++i) {
    if (!std::getline(ss, part, ',') || part.empty() || part.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(part) == 0)
      fail("--shape {}: expected M,N,K (positive integers)", s);
    if (part.size() > 6) fail("--shape {}: {} is over the 999999 this tool accepts per dimension", s, part);
    v[static_cast<size_t>(i)] = static_cast<uint32_t>(std::stoul(part));
  }
  return v;
}

// Offsets of the f16 scale fields of one block (set to small finite values: random bytes there
// could be inf/NaN).
std::vector<int> f16_fields(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q8_0: return {0};
    case DType::Q4_K: return {0, 2};
    case DType::Q6_K: return {208};
    default: return {};
  }
}

// The decode matvecs (see the top of the file): N columns, q8 = matvec_q8 (q8_1 x) else matvec_mmq.
int bench_matvec(const BenchOpts& o, const vulkan::DeviceInfo& info, const vulkan::Roofline& roof,
                 vulkan::ops::Env& env, vulkan::Recorder& rec, vulkan::Memory& mem, const vulkan::ops::Weight& w,
                 const std::vector<uint8_t>& wbytes, const std::vector<float>& x, uint32_t N, bool q8,
                 vulkan::ops::Region xr, vulkan::ops::Region qr, vulkan::ops::Region dr, vulkan::ops::Region yr,
                 vulkan::Buffer& ybuf, vulkan::Buffer& qbuf, vulkan::Buffer& dbuf) {
  const uint32_t M = static_cast<uint32_t>(w.rows), K = static_cast<uint32_t>(w.ne0);
  if (q8 && !info.int8_dot) fail("bench-op --kernel mmv-q8: the device has no shaderIntegerDotProduct");
  if (N > (q8 ? vulkan::fast::k_matvec_q8_max_cols : vulkan::fast::k_matvec_max_cols))
    fail("bench-op --kernel {}: N = {} columns (at most {})", q8 ? "mmv-q8" : "mmv", N,
         q8 ? vulkan::fast::k_matvec_q8_max_cols : vulkan::fast::k_matvec_max_cols);
  const vulkan::fast::MatvecShape sh = vulkan::fast::matvec_shape(*env.prof, info, M, K);
  const std::string kname = q8 ? "matvec_q8" : "matvec_mmq";
  // As in a decode step, the weights come from device memory, not the last-level cache: the repack
  // is copied until the copies hold ≥ 256 MiB (at most 32), and consecutive dispatches read
  // different copies. Warm-up: back-to-back dispatches for ≥ 0.3 s (a GPU that idles between
  // single dispatches runs them at its idle clock). Each repetition: one command buffer of 8
  // dispatches (a barrier between them: they all write y), its mean GPU time per dispatch.
  const uint64_t one = w.mmq_buf->size();
  const uint64_t n_copies = std::clamp<uint64_t>((uint64_t{256} << 20) / std::max<uint64_t>(one, 1), 1, 32);
  std::vector<vulkan::Buffer> copies;
  std::vector<vulkan::ops::Weight> ws(1, w);
  if (n_copies > 1) {
    std::vector<uint8_t> bytes(one);
    mem.download(*w.mmq_buf, 0, bytes.data(), one);
    copies.reserve(n_copies - 1);
    for (uint64_t c = 1; c < n_copies; ++c) {
      copies.push_back(mem.create("bench weight copy", one, vulkan::BufferKind::DEVICE));
      mem.upload(copies.back(), 0, bytes.data(), one);
      ws.push_back(w);
      ws.back().mmq_buf = &copies.back();
    }
  }
  size_t next = 0;
  // One command buffer: (q8: quantize_q8_1 first) then n matvecs.
  auto record = [&](uint32_t n) {
    if (q8) vulkan::fast::quantize_q8_1(env, xr, K, N, qr, dr, "quantize_q8_1");
    for (uint32_t i = 0; i < n; ++i) {
      const vulkan::ops::Weight& wi = ws[next++ % ws.size()];
      if (q8)
        vulkan::fast::matvec_q8(env, wi, qr, dr, N, yr, kname);
      else
        vulkan::fast::matvec_mmq(env, wi, xr, yr, kname, {}, nullptr, N);
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(300)) {
    rec.begin(false);
    record(64);
    rec.submit_and_wait();
  }
  constexpr uint32_t k_per_rep = 8;
  std::vector<double> all;
  for (uint32_t r = 0; r < o.reps; ++r) {
    rec.begin(true);
    record(k_per_rep);
    rec.submit_and_wait();
    if (rec.timings().size() < k_per_rep) fail("bench-op: the device returned no timestamps");
    double ms = 0;
    for (const auto& t : rec.timings())
      if (t.label == kname) ms += t.ms;
    all.push_back(ms / k_per_rep);
  }
  std::sort(all.begin(), all.end());
  const double best = all.front(), median = all[all.size() / 2];
  std::vector<float> y(size_t{M} * N);
  mem.download(ybuf, 0, y.data(), uint64_t{M} * N * 4);
  // The x the kernel multiplied: f32, or the q8_1 values it read.
  std::vector<double> xv(x.begin(), x.end());
  if (q8) {
    std::vector<uint32_t> qs(qbuf.size() / 4);
    std::vector<float> ds(dbuf.size() / 4);
    mem.download(qbuf, 0, qs.data(), qbuf.size());
    mem.download(dbuf, 0, ds.data(), dbuf.size());
    for (size_t b = 0; b < size_t{K} / 32 * N; ++b)
      for (uint32_t i = 0; i < 32; ++i)
        xv[b * 32 + i] = double(ds[2 * b]) * static_cast<int8_t>((qs[b * 8 + i / 4] >> (8 * (i % 4))) & 0xFF);
  }
  std::mt19937 rng(99);
  std::vector<float> wrow(K);
  double num = 0, den = 0;
  for (int s = 0; s < 64; ++s) {
    const uint32_t m = static_cast<uint32_t>(rng() % M), n = static_cast<uint32_t>(rng() % N);
    quant::dequantize_row(w.type, wbytes.data() + w.row_bytes * m, wrow.data(), K);
    double ref = 0;
    for (uint32_t k = 0; k < K; ++k) ref += static_cast<double>(wrow[k]) * xv[size_t{n} * K + k];
    const double got = y[size_t{n} * M + m];
    if (!std::isfinite(got)) fail("bench-op: output ({}, {}) was not written or is not finite", m, n);
    num += (got - ref) * (got - ref);
    den += ref * ref;
  }
  const double nmse = den > 0 ? num / den : num;
  const uint64_t x_bytes = q8 ? uint64_t{K} / 32 * N * 40 : uint64_t{K} * N * 4;  // q8_1: 32 + 8 per block
  const uint64_t bytes = w.mmq_buf->size() + x_bytes + uint64_t{M} * N * 4;       // repack + x + y
  const uint64_t gguf = w.row_bytes * M;
  const double gbs = double(bytes) / (best * 1e-3) / 1e9, gbs_gguf = double(gguf) / (best * 1e-3) / 1e9;
  const double pct = roof.copy_gbs > 0 ? 100.0 * gbs / roof.copy_gbs : 0;
  const std::string shape =
      fmt::format("{} invocations × {} rows, {} steps × {} per iteration, {} reduction", sh.wg, sh.rows,
                  sh.split == 0 ? "block" : (sh.split == 1 ? "half-block" : "quarter-block"), sh.unroll,
                  sh.subgroup ? "subgroup" : "shared-memory");
  if (o.json) {
    nlohmann::json j{{"device", info.name},
                     {"type", o.type},
                     {"M", M},
                     {"N", N},
                     {"K", K},
                     {"kernel", kname},
                     {"shape", shape},
                     {"q4k_nibbles", w.mmq_nibbles},
                     {"matvec_ms", best},
                     {"matvec_median_ms", median},
                     {"bytes", bytes},
                     {"gguf_bytes", gguf},
                     {"gbs", gbs},
                     {"gbs_gguf", gbs_gguf},
                     {"pct_copy", pct},
                     {"nmse_sampled", nmse},
                     {"roofline", {{"copy_gbs", roof.copy_gbs}}}};
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("bench-op {} M={} N={} K={} on {} — decode {} ({}{})\n", o.type, M, N, K, info.name, kname, shape,
               w.mmq_nibbles ? ", q4_K nibbles" : "");
    fmt::print("  {:<14} {:9.4f} ms (median {:.4f})  {:8.1f} GB/s of {:.1f} MB read", kname, best, median, gbs,
               double(bytes) / 1e6);
    if (!o.no_roofline) fmt::print("  = {:.1f} % of copy bandwidth ({:.0f} GB/s)", pct, roof.copy_gbs);
    fmt::print("\n  GGUF bytes     {:.1f} MB: {:.1f} GB/s\n", double(gguf) / 1e6, gbs_gguf);
    fmt::print("  check          NMSE {:.2e} on 64 sampled outputs vs CPU f64 with the same {} x\n", nmse,
               q8 ? "q8_1" : "f32");
  }
  if (!(nmse <= 1e-8)) fail("bench-op: sampled outputs differ from the CPU reference (NMSE {:.3e} > 1e-8)", nmse);
  return 0;
}

int run_bench_op(const BenchOpts& o) {
  const DType type = parse_type(o.type);
  const auto [M, N, K] = parse_shape(o.shape);
  const DTypeInfo& di = dtype_info(type);
  if (K % di.block_elems) fail("--shape: K = {} is not a multiple of {}'s block of {}", K, o.type, di.block_elems);
  if (o.kernel != "mmq" && o.kernel != "mmq-nodot" && o.kernel != "mmv" && o.kernel != "mmv-q8")
    fail("--kernel {}: expected mmq, mmq-nodot, mmv or mmv-q8", o.kernel);

  const runtime::EnvOptions& penv = process_env();
  auto inst = std::make_shared<vulkan::Instance>(runtime::instance_options(penv));
  vulkan::Device dev(inst, o.device);
  const vulkan::DeviceInfo& info = dev.info();
  const uint64_t timeout_s = penv.lab.vulkan_timeout_s;
  vulkan::Roofline roof;
  vulkan::RooflineOptions ro;
  ro.timeout_s = timeout_s;
  if (!o.no_roofline) roof = vulkan::measure_roofline(dev, ro);

  // The device's built-in profile, --tune FILE over it, ROCKY_TUNE's fragment over that: the tiles
  // and the matvec shapes measured.
  tune::DeviceProfile prof =
      tune::select_profile(info.vendor_id, info.driver_name, info.type == VK_PHYSICAL_DEVICE_TYPE_CPU);
  if (!o.tune.empty()) prof = tune::load_profile_override(o.tune, prof);
  if (!penv.lab.tune.is_null()) prof = tune::apply_profile_json(penv.lab.tune, prof, penv.lab.tune_source);
  prof.refuse_spills = !o.allow_spills;
  const bool use_dot = o.kernel == "mmq";

  vulkan::Memory mem(dev, 0);
  vulkan::Pipelines pipes(dev, true, penv.cache_dir);
  vulkan::Recorder rec(dev, info.max_storage_buffer_range, timeout_s);
  vulkan::ops::Env env{rec, pipes, info, {}, 128, false};
  env.prof = &prof;
  if (o.pipeline_stats) pipes.set_capture_statistics(true);

  // Random weights (scales fixed to small finite values) and activations.
  std::mt19937 rng(1234);
  const uint64_t rb = row_bytes(type, K);
  std::vector<uint8_t> wbytes(rb * M);
  {
    std::uniform_int_distribution<uint32_t> byte(0, 0xFFFFFFFFu);
    for (size_t i = 0; i + 4 <= wbytes.size(); i += 4) {
      uint32_t v = byte(rng);
      std::memcpy(&wbytes[i], &v, 4);
    }
    std::uniform_real_distribution<float> sc(0.002f, 0.03f);
    for (size_t b = 0; b < wbytes.size() / di.block_bytes; ++b)
      for (int f : f16_fields(type)) {
        uint16_t h = quant::f32_to_f16(sc(rng));
        std::memcpy(&wbytes[b * di.block_bytes + static_cast<size_t>(f)], &h, 2);
      }
  }
  std::vector<float> x(static_cast<size_t>(K) * N);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& v : x) v = u(rng);

  vulkan::Buffer wbuf = mem.create("bench weight", wbytes.size(), vulkan::BufferKind::DEVICE);
  vulkan::Buffer xbuf = mem.create("bench x", x.size() * 4, vulkan::BufferKind::DEVICE);
  vulkan::Buffer qbuf = mem.create("bench q8_1 qs", vulkan::fast::q8_1_qs_bytes(K, N), vulkan::BufferKind::DEVICE);
  vulkan::Buffer dbuf = mem.create("bench q8_1 ds", vulkan::fast::q8_1_ds_bytes(K, N), vulkan::BufferKind::DEVICE);
  vulkan::Buffer ybuf = mem.create("bench y", uint64_t{M} * N * 4, vulkan::BufferKind::DEVICE);
  mem.upload(wbuf, 0, wbytes.data(), wbytes.size());
  mem.upload(xbuf, 0, x.data(), x.size() * 4);
  std::vector<float> poison(static_cast<size_t>(M) * N, std::nanf(""));
  mem.upload(ybuf, 0, poison.data(), poison.size() * 4);

  vulkan::ops::Weight w{&wbuf, type, K, M, rb, "bench weight"};
  // The same load-time repack as VulkanBackend::load_weights (layout: ops/matmul_fast.hpp).
  vulkan::Buffer mmq_buf = vulkan::fast::upload_for_mmq(mem, w, wbytes.data(), prof.mmq_nibbles(w.type));
  w.mmq_buf = &mmq_buf;
  const tune::MatmulTile& tile = tune::pick_mmq_tile(prof, M, N);
  vulkan::ops::Region xr{&xbuf, 0, xbuf.size()}, qr{&qbuf, 0, qbuf.size()}, dr{&dbuf, 0, dbuf.size()},
      yr{&ybuf, 0, ybuf.size()};

  if (o.kernel == "mmv" || o.kernel == "mmv-q8" || (N == 1 && o.kernel == "mmq"))
    return bench_matvec(o, info, roof, env, rec, mem, w, wbytes, x, N, o.kernel == "mmv-q8", xr, qr, dr, yr, ybuf, qbuf,
                        dbuf);

  double best_q = 1e30, best_mm = 1e30;
  std::vector<double> all_mm;
  for (uint32_t r = 0; r <= o.reps; ++r) {
    rec.begin(true);
    vulkan::fast::quantize_q8_1(env, xr, K, N, qr, dr, "quantize_q8_1");
    vulkan::fast::mul_mmq(env, prof, w, qr, dr, N, yr, use_dot, "mul_mmq");
    rec.submit_and_wait();
    if (rec.timings().size() < 2) fail("bench-op: the device returned no timestamps");
    if (r == 0) continue;  // warm-up
    best_q = std::min(best_q, rec.timings()[0].ms);
    double mm = 0;
    for (size_t i = 1; i < rec.timings().size(); ++i) mm += rec.timings()[i].ms;
    best_mm = std::min(best_mm, mm);
    all_mm.push_back(mm);
  }
  std::sort(all_mm.begin(), all_mm.end());
  const double median_mm = all_mm[all_mm.size() / 2];

  // Check 64 sampled outputs against the CPU product of the same q8_1 activations.
  std::vector<uint32_t> qs(qbuf.size() / 4);
  std::vector<float> ds(dbuf.size() / 4), y(static_cast<size_t>(M) * N);
  mem.download(qbuf, 0, qs.data(), qbuf.size());
  mem.download(dbuf, 0, ds.data(), dbuf.size());
  mem.download(ybuf, 0, y.data(), ybuf.size());
  double num = 0, den = 0;
  std::vector<float> wrow(K);
  const uint32_t nblk = K / 32;
  for (int s = 0; s < 64; ++s) {
    uint32_t m = static_cast<uint32_t>(rng() % M), n = static_cast<uint32_t>(rng() % N);
    quant::dequantize_row(type, wbytes.data() + rb * m, wrow.data(), K);
    double ref = 0;
    for (uint32_t b = 0; b < nblk; ++b) {
      const double d = ds[2 * (static_cast<size_t>(n) * nblk + b)];
      for (uint32_t i = 0; i < 32; ++i) {
        uint32_t word = qs[(static_cast<size_t>(n) * nblk + b) * 8 + i / 4];
        int q = static_cast<int8_t>((word >> (8 * (i % 4))) & 0xFF);
        ref += static_cast<double>(wrow[b * 32 + i]) * d * q;
      }
    }
    double got = y[static_cast<size_t>(n) * M + m];
    if (!std::isfinite(got)) fail("bench-op: output ({}, {}) was not written or is not finite", m, n);
    num += (got - ref) * (got - ref);
    den += ref * ref;
  }
  const double nmse = den > 0 ? num / den : num;

  const double flop = 2.0 * M * N * K;
  const double tflops = flop / (best_mm * 1e-3) / 1e12;
  const double tflops_q = flop / ((best_mm + best_q) * 1e-3) / 1e12;
  const double pct_dot = roof.int8_dot_tops > 0 ? 100.0 * tflops / roof.int8_dot_tops : 0;
  const double pct_fp32 = roof.fp32_tflops > 0 ? 100.0 * tflops / roof.fp32_tflops : 0;
  std::vector<vulkan::PipelineStats> stats;
  if (o.pipeline_stats) stats = vulkan::collect_statistics(pipes);

  if (o.json) {
    nlohmann::json j{{"device", info.name},
                     {"type", o.type},
                     {"M", M},
                     {"N", N},
                     {"K", K},
                     {"kernel", o.kernel},
                     {"profile", prof.name},
                     {"tile", tile.str()},
                     {"q4k_nibbles", w.mmq_nibbles},
                     {"mul_mmq_ms", best_mm},
                     {"mul_mmq_median_ms", median_mm},
                     {"quantize_ms", best_q},
                     {"tflops", tflops},
                     {"tflops_with_quantize", tflops_q},
                     {"pct_int8_dot_peak", pct_dot},
                     {"pct_fp32_peak", pct_fp32},
                     {"nmse_sampled", nmse},
                     {"roofline",
                      {{"fp32_tflops", roof.fp32_tflops},
                       {"fp16_tflops", roof.fp16_tflops},
                       {"int8_dot_tops", roof.int8_dot_tops},
                       {"copy_gbs", roof.copy_gbs}}}};
    if (o.pipeline_stats) j["pipeline_stats"] = vulkan::stats_json(stats);
    fmt::print("{}\n", j.dump(2));
  } else {
    if (o.pipeline_stats) vulkan::print_stats(stats);
    fmt::print("bench-op {} M={} N={} K={} on {} — kernel {}{}, profile {}, tile {}\n", o.type, M, N, K, info.name,
               o.kernel, use_dot ? " (OpSDot)" : " (no int8 dot)", prof.name,
               tile.str() + (w.mmq_nibbles ? " q4_K nibbles" : ""));
    fmt::print("  mul_mmq        {:9.3f} ms (median {:.3f})  {:8.2f} TFLOPS", best_mm, median_mm, tflops);
    if (!o.no_roofline)
      fmt::print("  = {:.1f} % of int8-dot peak ({:.1f} TOPS), {:.1f} % of FP32 peak ({:.1f} TFLOPS)", pct_dot,
                 roof.int8_dot_tops, pct_fp32, roof.fp32_tflops);
    fmt::print("\n  quantize_q8_1  {:9.3f} ms   (matmul + quantize: {:.2f} TFLOPS)\n", best_q, tflops_q);
    fmt::print("  check          NMSE {:.2e} on 64 sampled outputs vs CPU f64 with the same q8_1 activations\n", nmse);
  }
  if (!(nmse <= 1e-6)) fail("bench-op: sampled outputs differ from the CPU reference (NMSE {:.3e} > 1e-6)", nmse);
  return 0;
}

}  // namespace

void add_bench_op(CLI::App& app, Runner& run) {
  auto o = std::make_shared<BenchOpts>();
  auto* sub = app.add_subcommand("bench-op",
                                 "Time one prefill matmul (FLOP = 2·M·N·K) against the roofline; N = 1: the "
                                 "decode matvec in GB/s against the copy bandwidth");
  sub->add_option("--type", o->type, "Weight type: q4_0, q8_0, q4_K, q6_K")->capture_default_str();
  sub->add_option("--shape", o->shape, "M,N,K: weight rows, tokens, inner dimension")->capture_default_str();
  sub->add_option("--kernel", o->kernel,
                  "mmq (packed int8 dot), mmq-nodot (fallback), mmv (decode matvec, f32 x, N ≤ 8; N = 1's default) "
                  "or mmv-q8 (int8-dot decode matvec, q8_1 x, N ≤ 64)")
      ->capture_default_str();
  sub->add_option("--tune", o->tune, "JSON tuning-profile override (src/tune/tile.hpp)");
  sub->add_option("--device", o->device, "Vulkan device: N or vulkan:N")->transform(vulkan_device_index());
  sub->add_option("--reps", o->reps, "Timed repetitions (best and median reported)")->check(CLI::Range(1, 1000));
  sub->add_flag("--no-roofline", o->no_roofline, "Skip measuring the roofline");
  sub->add_flag("--pipeline-stats", o->pipeline_stats, "Log VK_KHR_pipeline_executable_properties statistics");
  sub->add_flag("--allow-spills", o->allow_spills,
                "With --pipeline-stats: run (and log) a kernel whose statistics show spills instead of refusing it");
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->callback([&run, o] { run = [o] { return run_bench_op(*o); }; });
}

}  // namespace rocky::lab
