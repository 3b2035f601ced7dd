// Helpers for the grammar tests: a byte-level vocabulary (one token per byte) to match whole
// strings, and full-string acceptance.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/gbnf.hpp"
#include "grammar/matcher.hpp"

namespace rocky::test {

// Token b (0..255) is byte b; token 256 is the end of generation.
inline std::shared_ptr<const grammar::TokenTrie> byte_trie() {
  static std::shared_ptr<const grammar::TokenTrie> t = [] {
    std::vector<std::string> p(257);
    for (int b = 0; b < 256; ++b) p[static_cast<size_t>(b)] = std::string(1, static_cast<char>(b));
    return grammar::TokenTrie::from_pieces(std::move(p), {256});
  }();
  return t;
}

inline std::shared_ptr<grammar::CompiledGrammar> compile(const std::string& gbnf,
                                                         std::shared_ptr<const grammar::TokenTrie> trie = byte_trie()) {
  return std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(gbnf), std::move(trie));
}

// Whether the grammar matches all of `s` (and is then complete).
inline bool matches(const std::shared_ptr<grammar::CompiledGrammar>& g, std::string_view s) {
  grammar::Matcher m(g);
  return m.accept_bytes(s) && m.accepting();
}
// Whether `s` is a prefix of something the grammar matches.
inline bool prefix_ok(const std::shared_ptr<grammar::CompiledGrammar>& g, std::string_view s) {
  grammar::Matcher m(g);
  return m.accept_bytes(s);
}

}  // namespace rocky::test
