// Helpers shared by the tokenizer tests: cached tokenizers for the shared reference files.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/shared.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::test {

// Loads (once per process) the tokenizer of a file under ../shared/reference/.
inline const tok::Tokenizer& shared_tokenizer(const std::string& rel) {
  static std::map<std::string, std::unique_ptr<tok::Tokenizer>> cache;
  auto& slot = cache[rel];
  if (!slot) slot = std::make_unique<tok::Tokenizer>(tok::Tokenizer::load(shared_path("reference/" + rel)));
  return *slot;
}

inline std::string read_text(const std::string& path) {
  auto b = read_file_bytes(path);
  return std::string(b.begin(), b.end());
}

}  // namespace rocky::test
