// Output file types and the per-tensor type rule of `rocky quantize` / `rocky synth`, and the
// tensor plan (names, shapes, types) of a synthetic model.
//
// Type rule (llama.cpp src/llama-quant.cpp, llama_tensor_get_type, for the file types below):
//   - only 2-D tensors whose name ends in "weight" are converted; 1-D tensors (norms, biases) stay f32;
//   - q8_0 / q6_K / f16 / bf16 file: every such weight gets that type;
//   - q4_K_M file: default q4_K; attn_v.weight and ffn_down.weight of layer i become q6_K when
//     use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2 (integer division,
//     n = n_layer); the LM head (output.weight, or token_embd.weight when there is no output.weight)
//     becomes q6_K (for every k-quant file type; it stays q8_0 in a q8_0 file);
//   - a tensor whose row length (ne0) is not a multiple of 256 cannot hold k-quant blocks and falls
//     back: q4_K → q5_0, q6_K → q8_0.
// general.file_type is llama.cpp's llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q8_0 7,
// MOSTLY_Q4_K_M 15, MOSTLY_Q6_K 18, MOSTLY_BF16 32.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "gguf/names.hpp"
#include "synth/presets.hpp"

namespace rocky::synth {

enum class FileType { F32, F16, BF16, Q8_0, Q6_K, Q4_K_M, Q5_K_M };

// "f32", "f16", "bf16", "q8_0", "q6_k", "q4_k_m" (case-insensitive); rocky::Error otherwise.
FileType parse_file_type(std::string_view s);
std::string_view file_type_name(FileType t);  // "Q4_K_M", …
uint32_t llama_ftype(FileType t);             // general.file_type value

// llama.cpp's use_more_bits(i_layer, n_layers).
bool use_more_bits(int64_t i_layer, int64_t n_layer);

// Layer index of a "blk.<i>.…" tensor name; -1 for other names.
using gguf::layer_of;

// The type tensor `name` of `n_dims` dimensions with row length `ne0` gets in a `ft` file, in a
// model of `n_layer` blocks; `has_output` = the model has its own output.weight.
DType tensor_type(FileType ft, std::string_view name, uint32_t n_dims, uint64_t ne0, int64_t n_layer, bool has_output);

// What a tensor holds (decides the synthetic initialisation, see weights.hpp).
enum class Role {
  Embedding,
  Output,
  Norm,
  AttnQ,
  AttnK,
  AttnV,
  AttnOut,
  BiasQ,
  BiasK,
  BiasV,
  FfnGate,
  FfnUp,
  FfnDown,
  RopeFreqs,  // rope_freqs.weight: computed from the preset's rope scaling (weights.hpp), not random
  // qwen35 Gated DeltaNet tensors
  AttnQkv,    // attn_qkv [n_embd → conv channels]
  AttnGate,   // attn_gate (z) [n_embd → H_v·d_v]
  SsmConv,    // ssm_conv1d [kernel, channels] f32
  SsmA,       // ssm_a [H_v] f32, −exp(A_log) < 0
  SsmDtBias,  // ssm_dt.bias [H_v] f32
  SsmAlpha,   // ssm_alpha / ssm_beta [n_embd → H_v]
  SsmOut,     // ssm_out [H_v·d_v → n_embd]
};

struct PlannedTensor {
  std::string name;
  Role role = Role::Norm;
  int64_t layer = -1;  // block index, -1 outside the blocks
  uint32_t n_dims = 1;
  std::array<uint64_t, 4> ne{1, 1, 1, 1};  // GGUF order, ne[0] = row length
  DType type = DType::F32;

  uint64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  uint64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  uint64_t n_bytes() const { return row_bytes(type, ne[0]) * rows(); }
};

// Every tensor of preset `p` with `n_layer` blocks in file order (as llama.cpp's converter writes
// them: token_embd, rope_freqs (Llama 3.x), the blocks, output_norm, output), with its type in an
// `ft` file. The qwen2 blocks have q/k/v biases, the qwen3 blocks q/k norms [head_dim]; a tied
// preset has no output.weight.
std::vector<PlannedTensor> tensor_plan(const Preset& p, uint32_t n_layer, FileType ft);

}  // namespace rocky::synth
