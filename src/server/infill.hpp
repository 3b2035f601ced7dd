// POST /infill's prompt: the model's fill-in-the-middle tokens and llama-server's repo-level layout
// (Qwen2.5-Coder's, arXiv 2409.12186), so that editor plugins written for llama-server (llama.vim,
// llama.vscode) get the same prompt from rocky:
//
//   [FIM_REP]myproject\n                          (when the model has a repo token)
//   [FIM_SEP]{filename}\n{text}  per input_extra  (no sep token: "\n\n--- snippet ---\n\n" + text)
//   [FIM_SEP]filename\n                           (when the model has a sep token)
//   [BOS]                                         (when the vocab adds one)
//   [FIM_PRE]{prefix}{prompt}[FIM_SUF]{suffix}[FIM_MID]
//
// The prefix keeps its last 3/4·n_batch tokens, the suffix its first n_batch/4 − 2 − |prompt|;
// the extra context is cut from its front to n_ctx − n_batch − 2·n_predict tokens (llama-server's
// format_infill, field for field).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.hpp"
#include "server/retrieval_request.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::server {

// The FIM token ids (-1: the model has none): tokenizer.ggml.fim_{pre,suf,mid,pad,rep,sep}_token_id,
// else the vocab's token of a known spelling (<|fim_prefix|>, <fim-prefix>, <PRE>, …; <|repo_name|>,
// <|file_sep|>), as llama.cpp finds them.
struct FimTokens {
  int32_t pre = -1, suf = -1, mid = -1, pad = -1, rep = -1, sep = -1;
  // "" when pre, suf and mid are all there; else what is missing, for the 400.
  std::string missing() const;
};

FimTokens find_fim_tokens(const gguf::GgufFile& f, const tok::Vocab& v);

// The prompt of an infill request (`prompt` is the request's prompt already tokenized).
std::vector<int32_t> format_infill(const tok::Tokenizer& tok, const FimTokens& fim, const InfillRequest& r,
                                   const std::vector<int32_t>& prompt, int32_t n_batch, int32_t n_predict,
                                   int32_t n_ctx);

}  // namespace rocky::server
