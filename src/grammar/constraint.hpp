// Entry points the programs use: compile a GBNF text or a JSON Schema against a tokenizer's
// vocabulary. The vocabulary trie is built once per tokenizer and shared (it is immutable); the
// compiled grammar holds per-request caches and belongs to one generation.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "grammar/matcher.hpp"

namespace rocky::tok {
class Tokenizer;
}

namespace rocky::grammar {

// The trie of `tok`'s vocabulary (built on first use, then cached for the tokenizer's lifetime).
std::shared_ptr<const TokenTrie> trie_for(const tok::Tokenizer& tok);

// Throw rocky::Error naming line:col (GBNF) or the JSON pointer (schema).
std::shared_ptr<CompiledGrammar> compile_gbnf(const std::string& gbnf, const tok::Tokenizer& tok);
std::shared_ptr<CompiledGrammar> compile_json_schema(const nlohmann::json& schema, const tok::Tokenizer& tok);

}  // namespace rocky::grammar
