// Requests of llama-server's code-infill and retrieval endpoints: POST /infill, /v1/embeddings
// (and /embeddings, /embedding), /rerank (and /v1/rerank). Pure functions of the body, no HTTP or
// model (fuzzed with request.cpp's parsers): each bad field is an ApiError naming it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/request.hpp"

namespace rocky::server {

// One input_extra chunk: another file of the project (llama.vim / llama.vscode send the ring buffer
// of recently seen code this way).
struct InfillChunk {
  std::string filename = "tmp";  // llama-server's default
  std::string text;
};

// POST /infill: llama-server's fields. `completion` holds everything /completion takes (n_predict,
// sampling, stream, cache_prompt…); its prompt is the text after the prefix ("" when absent).
struct InfillRequest {
  std::string input_prefix, input_suffix;
  std::vector<InfillChunk> input_extra;
  CompletionRequest completion;
};

InfillRequest parse_infill(const nlohmann::ordered_json& body);

// One input of an embedding or rerank request: text, or token ids.
struct TextOrTokens {
  std::optional<std::string> text;
  std::vector<int32_t> tokens;
  std::string param;  // the field, for errors: "input", "input[2]"
};

// POST /v1/embeddings (oai: `input`; OpenAI's shape) and /embedding (native: `content` or `input`;
// llama-server's shape). `input` is a string, a list of strings, a list of token ids, or a list of
// token-id lists.
struct EmbeddingRequest {
  std::string model;
  std::vector<TextOrTokens> inputs;
  bool base64 = false;     // encoding_format "base64": little-endian float32, base64 encoded
  int embd_normalize = 2;  // llama-server's: -1 none, 0 max-abs (int16 scale), 1 taxicab, 2 L2, p > 2 p-norm
};

EmbeddingRequest parse_embeddings(const nlohmann::ordered_json& body, bool oai);

// POST /rerank, /v1/rerank (Jina / Cohere shape, as llama-server): query + documents → scores.
struct RerankRequest {
  std::string model;
  std::string query;
  std::vector<std::string> documents;
  int64_t top_n = -1;  // -1: all
  bool return_documents = true;
};

RerankRequest parse_rerank(const nlohmann::ordered_json& body);

}  // namespace rocky::server
