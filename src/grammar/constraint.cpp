// Grammar compilation against a tokenizer (see constraint.hpp).
#include "grammar/constraint.hpp"

#include <map>
#include <mutex>

#include "grammar/gbnf.hpp"
#include "grammar/json_schema.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::grammar {

std::shared_ptr<const TokenTrie> trie_for(const tok::Tokenizer& tok) {
  // Keyed by the tokenizer's address, checked against its vocabulary (a later tokenizer at a
  // reused address gets a fresh trie).
  struct Entry {
    size_t n_vocab;
    std::string first, last;
    std::shared_ptr<const TokenTrie> trie;
  };
  static std::mutex mu;
  static std::map<const tok::Tokenizer*, Entry> cache;
  const tok::Vocab& v = tok.vocab();
  const std::string first = v.size() ? v.token(0).text : "";
  const std::string last = v.size() ? v.token(static_cast<tok::TokenId>(v.size() - 1)).text : "";
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(&tok);
  if (it != cache.end() && it->second.n_vocab == v.size() && it->second.first == first && it->second.last == last)
    return it->second.trie;
  auto t = TokenTrie::build(tok);
  cache[&tok] = Entry{v.size(), first, last, t};
  return t;
}

std::shared_ptr<CompiledGrammar> compile_gbnf(const std::string& gbnf, const tok::Tokenizer& tok) {
  return std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), trie_for(tok));
}

std::shared_ptr<CompiledGrammar> compile_json_schema(const nlohmann::json& schema, const tok::Tokenizer& tok) {
  return compile_gbnf(json_schema_to_gbnf(schema), tok);
}

}  // namespace rocky::grammar
