// `rocky synth` and `rocky quantize`: synthetic real-shape models and F32/F16/BF16 → q8_0 / q6_K /
// q4_K_M conversion, both streamed to disk tensor by tensor (see stream_writer.hpp).
//
// A synth file carries the preset's exact hyper-parameters under `<arch>.*` keys (qwen2 or llama,
// as llama.cpp's converter writes them), a generated tokenizer (vocab_gen.hpp), general.file_type,
// and rocky.synth.{preset,seed} so tools can tell it is synthetic. Weights: weights.hpp. Tensor
// names, shapes and types: plan.hpp (tensor_plan); the file holds exactly that plan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gguf/writer.hpp"
#include "synth/plan.hpp"
#include "synth/presets.hpp"
#include "synth/vocab_gen.hpp"

namespace rocky::synth {

struct SynthOptions {
  std::string preset;  // presets.hpp name
  std::string out;     // output path
  FileType type = FileType::Q4_K_M;
  std::optional<uint32_t> layers;  // override n_layer (≥ 1); default: the preset's
  std::optional<uint32_t> vocab;   // for tests: override n_vocab (≥ 512) to keep files small
  uint64_t seed = 0;
  unsigned threads = 0;  // 0: all hardware threads
  bool progress = true;
};

struct WriteSummary {
  uint64_t n_tensors = 0;
  uint64_t n_params = 0;
  uint64_t tensor_bytes = 0;  // sum of tensor data sizes (without padding)
  uint64_t file_bytes = 0;
};

// Metadata of a synthetic model (hyper-parameters, tokenizer, file type) into `w`.
void set_synth_metadata(gguf::Writer& w, const Preset& p, uint32_t n_layer, FileType ft, uint64_t seed,
                        const GeneratedVocab& vocab);

// The preset with o.vocab applied; rocky::Error for an unknown name or a bad override.
Preset synth_preset(const SynthOptions& o);

WriteSummary synth_model(const SynthOptions& o);

struct QuantizeOptions {
  std::string in, out;
  FileType type = FileType::Q4_K_M;  // q8_0, q6_K or q4_K_M (f16/bf16/f32 also accepted)
  unsigned threads = 0;
  bool progress = true;
};

// Converts `in` (every tensor f32, f16 or bf16) to `type` with plan.hpp's rule; the metadata is
// copied, general.file_type and general.quantization_version set. rocky::Error when the input holds
// an already-quantized tensor (naming it), lacks <arch>.block_count, or a row cannot be converted.
WriteSummary quantize_model(const QuantizeOptions& o);

}  // namespace rocky::synth
