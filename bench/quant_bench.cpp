// dequantize_row throughput per block type (Google Benchmark; not part of ctest).
// Build: cmake --build build --target quant_bench; run: build/tests/quant/quant_bench.
// Each iteration decodes one row of 4096 elements, the size the CPU oracle dequantizes per chunk;
// bytes/s counts the quantized input, items/s the floats produced.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.hpp"
#include "quant/quant.hpp"

namespace {

using rocky::DType;

constexpr int64_t k_row = 4096;

void bm_dequantize_row(benchmark::State& state, DType t) {
  // A realistic row: quantize normal data where a quantizer exists, else random bytes with sane
  // (finite, small) scales would be needed; random bytes decode at the same speed, so use them.
  std::vector<uint8_t> src(rocky::row_bytes(t, k_row));
  std::mt19937_64 rng(1);
  if (rocky::quant::can_quantize(t)) {
    std::normal_distribution<float> nd;
    std::vector<float> x(k_row);
    for (auto& v : x) v = nd(rng);
    rocky::quant::quantize_row(t, x.data(), src.data(), k_row);
  } else {
    for (auto& b : src) b = static_cast<uint8_t>(rng());
  }
  std::vector<float> dst(k_row);
  for (auto _ : state) {
    rocky::quant::dequantize_row(t, src.data(), dst.data(), k_row);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(src.size()));
  state.SetItemsProcessed(state.iterations() * k_row);
}

const int k_registered = [] {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                  DType::Q8_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K}) {
    benchmark::RegisterBenchmark(("dequantize_row/" + std::string(rocky::dtype_name(t))).c_str(),
                                 [t](benchmark::State& s) { bm_dequantize_row(s, t); });
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
