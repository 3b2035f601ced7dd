// Deterministic tokenizer vocabularies for synthetic models: the right size and the right kind
// (byte-level BPE for qwen2, SentencePiece-style for llama), generated from a fixed-seed PRNG, so
// no third-party vocab is ever stored. The result is a complete `tokenizer.ggml.*` section that
// llama.cpp (src/llama-vocab.cpp) and rocky's tokenizer load:
//
// BPE (qwen2, tokenizer.ggml.model "gpt2", pre "qwen2"):
//   ids [0, 256)        the 256 byte tokens, spelled through the GPT-2 byte→unicode map (" " = "Ġ")
//   ids [256, n_text)   merged tokens; merge k ("left right", rank k) makes token 256 + k, and both
//                       parts are earlier tokens, so every merge's result is in the vocab
//   next 22 ids         Qwen2.5's added tokens in Qwen's order: <|endoftext|>, <|im_start|>,
//                       <|im_end|>, … as CONTROL; <tool_call>, </tool_call>, the FIM and repo
//                       tokens as USER_DEFINED (as llama.cpp's converter marks non-special added tokens)
//   the rest            "[PAD<id>]" UNUSED (the real files pad 151665 → 151936 / 152064 this way)
//   n_text = min(151643, n_vocab − 22): the real Qwen2.5 layout for the real vocab sizes.
//   bos = padding = <|endoftext|>, eos = <|im_end|> (as Qwen2.5-Instruct), no BOS added.
// SPM (llama, tokenizer.ggml.model "llama", pre "default"):
//   0 <unk> UNKNOWN, 1 <s> CONTROL, 2 </s> CONTROL, 3..258 <0x00>..<0xFF> BYTE (score 0),
//   then NORMAL pieces (spaces as U+2581 "▁"): single characters first, then pieces made of two
//   earlier pieces; score = −(id − 259), so earlier pieces merge first. bos 1, eos 2, unk 0, add BOS.
// SPM Gemma 3 (gemma3, model "llama", pre "default", add_space_prefix false): 0 <pad>, 1 <eos>,
//   2 <bos>, 3 <unk>, 4 <mask>, 5..105 <unused0..100> (UNUSED), 106 <start_of_turn>, 107
//   <end_of_turn> (CONTROL, the turn markers of Gemma's chat template), 108..363 the byte tokens,
//   then pieces as above. bos 2 (added), eos <end_of_turn> (the -it models stop there), unk 3, pad 0.
// Same preset → byte-identical vocab (the PRNG seed is fixed; --seed changes only the weights).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "synth/presets.hpp"

namespace rocky::synth {

struct GeneratedVocab {
  std::string model;                // tokenizer.ggml.model
  std::string pre;                  // tokenizer.ggml.pre
  std::vector<std::string> tokens;  // [n_vocab]
  std::vector<int32_t> types;       // [n_vocab] llama_token_type: 1 normal … 6 byte
  std::vector<float> scores;        // [n_vocab] SPM only (empty for BPE)
  std::vector<std::string> merges;  // BPE only: "left right", rank = index
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;
  bool add_bos = false;
  bool add_space_prefix = true;  // SPM: tokenizer.ggml.add_space_prefix (written only when false)
  std::string chat_template;     // tokenizer.chat_template ("" = none)
};

// n_vocab = p.n_vocab tokens; rocky::Error when the size cannot hold the fixed tokens (< 512).
GeneratedVocab generate_vocab(const Preset& p);

// GPT-2's byte → unicode code point map (printable bytes map to themselves, the others to 256+k).
uint32_t gpt2_byte_to_cp(uint8_t b);

}  // namespace rocky::synth
