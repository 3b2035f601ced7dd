// CPU ops on quantized weights: get_rows / dequant_rows vs ggml's own dequantized values
// (reference/ref/dequant/*.json), and the chunked matmul vs a naive f64 product on the same
// dequantized rows, with awkward N and several chunks.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "backend/cpu/ops.hpp"
#include "common/shared.hpp"
#include "gguf/gguf.hpp"
#include "quant/quant.hpp"

namespace rocky::backend::cpu {
namespace {

TEST(CpuOpsQuant, DequantRowsMatchGgml) {
  int checked = 0;
  for (const char* label :
       {"synth-llama-q4_k_m", "synth-llama-q8_0", "synth-qwen2-q4_k_m", "stories260K-f16", "llama-2-tiny-random"}) {
    std::ifstream jf(test::shared_path(std::string("reference/ref/dequant/") + label + ".json"));
    auto j = nlohmann::json::parse(jf);
    const std::string mf = j.at("model_file").get<std::string>();
    const std::string dir = mf.rfind("synth-", 0) == 0 ? "reference/models/synth/" : "reference/models/";
    auto f = gguf::GgufFile::open(test::shared_path(dir + mf));
    for (const auto& [tname, t] : j.at("types").items()) {
      const auto* ti = f.find_tensor(t.at("tensor").get<std::string>());
      ASSERT_NE(ti, nullptr);
      auto want = t.at("values_ggml_to_float").get<std::vector<float>>();
      WeightView w = view_of(*ti);
      const int64_t rows = (static_cast<int64_t>(want.size()) + w.k - 1) / w.k;
      std::vector<float> got(static_cast<size_t>(rows * w.k));
      dequant_rows(w, 0, rows, got.data());
      for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << label << " " << tname << " [" << i << "]";
      // get_rows of row 0 is the same row.
      std::vector<float> row(static_cast<size_t>(w.k));
      std::vector<int32_t> id = {0};
      get_rows(w, id, row.data());
      for (int64_t i = 0; i < std::min<int64_t>(w.k, static_cast<int64_t>(want.size())); ++i)
        ASSERT_EQ(row[i], want[i]);
      ++checked;
    }
  }
  EXPECT_GE(checked, 8);
}

// Chunked matmul (several chunks: K = 4096 → 256 rows per chunk) on quantized weights, vs f64.
TEST(CpuOpsQuant, MatmulChunkedQuantized) {
  std::mt19937 g(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (DType t : {DType::Q8_0, DType::F16, DType::Q4_K, DType::Q6_K}) {
    const int64_t K = 4096, M = 613, N = 3;
    ASSERT_GT(M, k_matmul_chunk_floats / K);  // more than one chunk
    std::vector<float> wf(static_cast<size_t>(K * M));
    for (auto& v : wf) v = nd(g);
    const uint64_t rb = row_bytes(t, K);
    std::vector<uint8_t> wq(rb * M);
    for (int64_t m = 0; m < M; ++m) quant::quantize_row(t, wf.data() + m * K, wq.data() + m * rb, K);
    WeightView w{t, wq.data(), K, M};
    std::vector<float> deq(wf.size());
    for (int64_t m = 0; m < M; ++m) quant::dequantize_row(t, wq.data() + m * rb, deq.data() + m * K, K);
    std::vector<float> x(static_cast<size_t>(K * N));
    for (auto& v : x) v = nd(g);
    std::vector<float> y(static_cast<size_t>(M * N));
    matmul(w, x.data(), N, y.data());
    double md = 0, mr = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t m = 0; m < M; ++m) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += static_cast<double>(deq[m * K + k]) * x[n * K + k];
        md = std::max(md, std::fabs(s - y[n * M + m]));
        mr = std::max(mr, std::fabs(s));
      }
    EXPECT_LE(md / mr, 1e-5) << dtype_name(t);
  }
}

}  // namespace
}  // namespace rocky::backend::cpu
