// Random ggml weight rows for the fast-kernel tests (mul_mmq, its epilogues, matvec_mmq): random
// bytes with finite small f16 scales (both signs, except q4_K's d and dmin, which stay positive),
// and their values as quant::dequantize_row gives them (the reference the GPU results are held to).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.hpp"
#include "quant/quant.hpp"

namespace rocky::test {

// Byte offsets of the f16 scale fields inside one block of `t` (ggml's block layouts).
inline std::vector<int> f16_fields(DType t) {
  switch (t) {
    case DType::Q4_0: case DType::Q8_0: return {0};
    case DType::Q4_K: return {0, 2};
    case DType::Q6_K: return {208};
    default: return {};
  }
}

// m rows of k values of type t; `deq` receives the m × k dequantized values (row-major).
inline std::vector<uint8_t> random_weights(DType t, uint32_t k, uint32_t m, std::mt19937& rng, std::vector<float>& deq) {
  const auto& di = dtype_info(t);
  std::vector<uint8_t> w(row_bytes(t, k) * m);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> sc(0.002f, 0.03f), sgn(-1, 1);
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  for (size_t blk = 0; blk < w.size() / di.block_bytes; ++blk)
    for (int f : f16_fields(t)) {
      uint16_t h = quant::f32_to_f16(sc(rng) * (sgn(rng) < 0 && t != DType::Q4_K ? -1.0f : 1.0f));
      std::memcpy(&w[blk * di.block_bytes + static_cast<size_t>(f)], &h, 2);
    }
  deq.resize(static_cast<size_t>(k) * m);
  for (uint32_t r = 0; r < m; ++r) quant::dequantize_row(t, w.data() + row_bytes(t, k) * r, deq.data() + size_t{r} * k, k);
  return w;
}

}  // namespace rocky::test
