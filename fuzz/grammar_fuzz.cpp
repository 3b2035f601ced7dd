// libFuzzer target: GBNF text and JSON Schemas from arbitrary bytes. The first byte picks the
// input kind; the rest is the text. Only rocky::Error may come out of the parser and converter;
// a grammar that parses is compiled against a small vocabulary (single bytes and a few longer
// tokens) and walked for a few steps, each step's mask checked against the matcher token by token.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "grammar/gbnf.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"

namespace {

std::shared_ptr<const rocky::grammar::TokenTrie> vocab() {
  static auto t = [] {
    std::vector<std::string> p;
    for (int b = 0; b < 256; ++b) p.emplace_back(1, static_cast<char>(b));
    for (const char* s : {"{\"", "\":", "\"}", "ab", "true", "null", "12", "\xc3\xa9", "\\n", "<|x|>"})
      p.emplace_back(s);
    p.emplace_back();  // end of generation
    const auto eos = static_cast<int32_t>(p.size() - 1);
    return rocky::grammar::TokenTrie::from_pieces(std::move(p), {eos});
  }();
  return t;
}

void walk(const std::string& gbnf, uint32_t seed) {
  auto g = std::make_shared<rocky::grammar::CompiledGrammar>(rocky::grammar::parse_gbnf(gbnf), vocab());
  rocky::grammar::Matcher m(g);
  for (int step = 0; step < 8 && !m.finished(); ++step) {
    const std::vector<uint64_t> mask = m.mask();
    std::vector<int32_t> allowed;
    for (size_t t = 0; t < vocab()->n_vocab(); ++t) {
      const bool bit = (mask[t / 64] >> (t % 64)) & 1;
      if (bit != m.allowed(static_cast<int32_t>(t))) __builtin_trap();  // the mask disagrees with the matcher
      if (bit) allowed.push_back(static_cast<int32_t>(t));
    }
    if (allowed.empty()) return;
    seed = seed * 1103515245u + 12345u;
    if (!m.accept(allowed[seed % allowed.size()])) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (data[0] & 1) {
      walk(text, data[0]);
    } else {
      const nlohmann::json schema = nlohmann::json::parse(text, nullptr, false);
      if (schema.is_discarded()) return 0;
      walk(rocky::grammar::json_schema_to_gbnf(schema), data[0]);
    }
  } catch (const rocky::Error&) {}
  return 0;
}
