// JSON Schema → grammar: each keyword's instances accepted / rejected, errors naming the keyword
// and its JSON pointer, and every shared real-world schema compiled against Qwen2's vocabulary and
// walked to complete instances that parse as JSON.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "grammar/json_schema.hpp"
#include "grammar_test_util.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::grammar {
namespace {

using nlohmann::json;
using test::matches;
using test::prefix_ok;

std::shared_ptr<CompiledGrammar> schema(const std::string& s) {
  return test::compile(json_schema_to_gbnf(json::parse(s)));
}

std::string error_of(const std::string& s) {
  try {
    json_schema_to_gbnf(json::parse(s));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Schema, TypesAndLists) {
  auto g = schema(R"({"type": ["string", "null", "boolean"]})");
  EXPECT_TRUE(matches(g, R"("hi")"));
  EXPECT_TRUE(matches(g, "null"));
  EXPECT_TRUE(matches(g, "false"));
  EXPECT_FALSE(prefix_ok(g, "1"));
  auto any = schema("{}");
  EXPECT_TRUE(matches(any, R"({"a": [1, 2.5e3, {"b": null}], "c": "d\n\u00e9"})"));
}

TEST(Schema, ObjectsRequiredAndAdditional) {
  auto g = schema(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                     "c": {"type": "boolean"}}, "required": ["b"], "additionalProperties": false})");
  EXPECT_TRUE(matches(g, R"({"b": "x"})"));
  EXPECT_TRUE(matches(g, R"({"b":"x","a":1,"c":true})"));
  EXPECT_TRUE(matches(g, R"({"b": "x", "c": false})"));
  EXPECT_FALSE(matches(g, R"({"a": 1})"));
  EXPECT_FALSE(prefix_ok(g, R"({"b": "x", "d")"));
  auto extra = schema(R"({"type": "object", "properties": {"ab": {"type": "integer"}}, "required": ["ab"],
                         "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(matches(extra, R"({"ab": 1, "a": 2, "abc": 3, "x": 4})"));
  EXPECT_FALSE(prefix_ok(extra, R"({"ab": 1, "ab")"));     // a declared name is not an extra key
  EXPECT_FALSE(prefix_ok(extra, R"({"ab": 1, "x": "s)"));  // extra values follow their schema
  // A required property never declared: any value.
  auto undeclared = schema(R"({"type": "object", "required": ["k"], "properties": {}})");
  EXPECT_TRUE(matches(undeclared, R"({"k": [true]})"));
}

TEST(Schema, EnumConstAndCombinators) {
  auto e = schema(R"({"enum": ["red", 2, null, {"a": 1}]})");
  EXPECT_TRUE(matches(e, R"("red")"));
  EXPECT_TRUE(matches(e, R"({"a":1})"));
  EXPECT_FALSE(matches(e, R"("blue")"));
  auto c = schema(R"({"const": "fixed"})");
  EXPECT_TRUE(matches(c, R"("fixed")"));
  auto any = schema(R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]})");
  EXPECT_TRUE(matches(any, "12"));
  EXPECT_TRUE(matches(any, R"("ab")"));
  EXPECT_FALSE(matches(any, R"("abc")"));
  auto one = schema(R"({"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]},
                                  {"type": "null"}]})");
  EXPECT_TRUE(matches(one, R"({"k": 1})"));
  EXPECT_TRUE(matches(one, "null"));
  // allOf merges; required lists under anyOf combine with the object's own properties.
  auto all = schema(R"({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                  {"properties": {"b": {"type": "string"}}, "required": ["b"]}],
                        "additionalProperties": false})");
  EXPECT_TRUE(matches(all, R"({"a": 1, "b": "x"})"));
  EXPECT_FALSE(matches(all, R"({"a": 1})"));
  auto req = schema(R"({"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                        "anyOf": [{"required": ["x"]}, {"required": ["y"]}], "additionalProperties": false})");
  EXPECT_TRUE(matches(req, R"({"x": 1})"));
  EXPECT_TRUE(matches(req, R"({"y": 1})"));
  EXPECT_FALSE(matches(req, "{}"));
}

TEST(Schema, Refs) {
  auto g = schema(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                      "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"],
                      "additionalProperties": false}}, "$ref": "#/$defs/node"})");
  EXPECT_TRUE(matches(g, R"({"v": 1, "next": {"v": 2, "next": null}})"));
  auto d = schema(R"({"definitions": {"a~b": {"type": "boolean"}}, "type": "array",
                      "items": {"$ref": "#/definitions/a~0b"}})");
  EXPECT_TRUE(matches(d, "[true, false]"));
  EXPECT_EQ(error_of(R"({"properties": {"a": {"$ref": "#/$defs/missing"}}})"),
            "json schema at /properties/a: $ref '#/$defs/missing' does not resolve");
  EXPECT_EQ(error_of(R"({"$ref": "other.json#/a"})"),
            "json schema at /: $ref 'other.json#/a' is not local (only '#…' references are supported)");
}

TEST(Schema, Arrays) {
  auto g = schema(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})");
  EXPECT_TRUE(matches(g, "[1, 2]"));
  EXPECT_TRUE(matches(g, "[1,2,3]"));
  EXPECT_FALSE(matches(g, "[1]"));
  EXPECT_FALSE(prefix_ok(g, "[1,2,3,"));
  auto p = schema(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]})");
  EXPECT_TRUE(matches(p, R"(["a", 1])"));
  EXPECT_FALSE(matches(p, R"([1, "a"])"));
  auto empty = schema(R"({"type": "array", "maxItems": 0})");
  EXPECT_TRUE(matches(empty, "[]"));
}

TEST(Schema, Strings) {
  auto len = schema(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_TRUE(matches(len, R"("ab")"));
  EXPECT_TRUE(matches(len, R"("a\"é")"));  // escapes and code points count as one character
  EXPECT_FALSE(matches(len, R"("a")"));
  EXPECT_FALSE(matches(len, R"("abcd")"));
  auto pat = schema(R"({"type": "string", "pattern": "^[a-z]{3}[0-9]{2,}(-x|_y)?$"})");
  EXPECT_TRUE(matches(pat, R"("abc12")"));
  EXPECT_TRUE(matches(pat, R"("abc123_y")"));
  EXPECT_FALSE(matches(pat, R"("ab12")"));
  auto unanchored = schema(R"({"type": "string", "pattern": "\\.zip"})");
  EXPECT_TRUE(matches(unanchored, R"("a.zip.b")"));
  EXPECT_FALSE(matches(unanchored, R"("azip")"));
  auto date = schema(R"({"type": "string", "format": "date"})");
  EXPECT_TRUE(matches(date, R"("2024-02-29")"));
  EXPECT_TRUE(matches(date, R"("2000-02-29")"));
  EXPECT_FALSE(matches(date, R"("2023-02-29")"));
  EXPECT_FALSE(matches(date, R"("1900-02-29")"));
  EXPECT_FALSE(matches(date, R"("2023-04-31")"));
  EXPECT_FALSE(matches(date, R"("0000-01-01")"));
  auto time = schema(R"({"type": "string", "format": "time"})");
  EXPECT_TRUE(matches(time, R"("23:59:59Z")"));
  EXPECT_TRUE(matches(time, R"("08:00:00.5+05:30")"));
  EXPECT_FALSE(matches(time, R"("24:00:00Z")"));
  EXPECT_FALSE(matches(time, R"("08:00:00")"));
  auto dt = schema(R"({"type": "string", "format": "date-time"})");
  EXPECT_TRUE(matches(dt, R"("2024-01-31T12:00:00-01:00")"));
  auto uuid = schema(R"({"type": "string", "format": "uuid"})");
  EXPECT_TRUE(matches(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(matches(uuid, R"("123e4567e89b12d3a456426614174000")"));
  auto email = schema(R"({"type": "string", "format": "email"})");
  EXPECT_TRUE(matches(email, R"("a.b@example.com")"));
  EXPECT_FALSE(matches(email, R"("nope")"));
}

TEST(Schema, NumberBounds) {
  auto i = schema(R"({"type": "integer", "minimum": -12, "maximum": 345})");
  for (int v = -20; v <= 400; ++v) EXPECT_EQ(matches(i, std::to_string(v)), v >= -12 && v <= 345) << v;
  EXPECT_FALSE(matches(i, "007"));
  auto ex = schema(R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10})");
  EXPECT_FALSE(matches(ex, "0"));
  EXPECT_TRUE(matches(ex, "1"));
  EXPECT_TRUE(matches(ex, "9"));
  EXPECT_FALSE(matches(ex, "10"));
  auto open = schema(R"({"type": "integer", "minimum": 5})");
  EXPECT_TRUE(matches(open, "5"));
  EXPECT_TRUE(matches(open, "123456"));
  EXPECT_FALSE(matches(open, "4"));
  EXPECT_FALSE(matches(open, "-7"));
  auto n = schema(R"({"type": "number", "minimum": -1.5, "exclusiveMaximum": 2})");
  EXPECT_TRUE(matches(n, "1.99"));
  EXPECT_TRUE(matches(n, "-0.5"));
  EXPECT_TRUE(matches(n, "-1"));
  EXPECT_FALSE(matches(n, "2"));
  EXPECT_FALSE(matches(n, "2.0"));
  EXPECT_FALSE(matches(n, "-2"));
  EXPECT_FALSE(prefix_ok(n, "1e"));  // no exponent: 1e999 would be infinite
}

TEST(Schema, ErrorsNameKeywordAndPointer) {
  EXPECT_EQ(error_of(R"({"properties": {"a": {"type": "integer", "multipleOf": 2}}})"),
            "json schema at /properties/a: unsupported keyword 'multipleOf'");
  EXPECT_EQ(error_of(R"({"type": "array", "items": {"not": {}}})"), "json schema at /items: unsupported keyword 'not'");
  EXPECT_EQ(error_of(R"({"type": "string", "format": "ipv4"})"),
            "json schema at /format: unsupported format 'ipv4' (supported: date, time, date-time, uuid, email)");
  EXPECT_EQ(error_of(R"({"type": "wat"})"), "json schema at /type: unknown type 'wat'");
  EXPECT_EQ(error_of(R"({"type": "integer", "minimum": 5, "maximum": 1})"),
            "json schema at /: the bounds admit no value this converter can write");
  EXPECT_EQ(error_of(R"({"type": "string", "pattern": "^(?=a)$"})"),
            "json schema at /pattern: pattern '^(?=a)$': (?…) groups other than (?:…) are not supported at offset 2");
  EXPECT_EQ(error_of(R"({"anyOf": [{"type": "integer"}, false]})"),
            "json schema at /anyOf/1: the schema 'false' admits no value");
  // Annotations and unknown keywords are ignored.
  EXPECT_EQ(error_of(R"({"title": "t", "description": "d", "x-extra": 1, "_format": "z", "type": "null"})"), "");
}

// Every shared schema converts, compiles against Qwen2's vocabulary and yields complete JSON
// instances when walked with random allowed tokens.
TEST(Schema, SharedSchemasWalkToJson) {
  auto tok = tok::Tokenizer::load(test::shared_path("reference/vocab/ggml-vocab-qwen2-rebuilt.gguf"));
  auto trie = TokenTrie::build(tok);
  const std::string dir = test::shared_path("reference/schemas");
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 100u);
  int complete = 0;
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    std::ifstream in(f);
    const json s = json::parse(in);
    std::shared_ptr<CompiledGrammar> g;
    ASSERT_NO_THROW(g = std::make_shared<CompiledGrammar>(parse_gbnf(json_schema_to_gbnf(s)), trie));
    Matcher m(g);
    std::mt19937 rng(42);
    std::string out;
    // Prefer short tokens and closing brackets so that walks end; any allowed token keeps validity.
    for (int step = 0; step < 2000 && !m.finished(); ++step) {
      const auto& mask = m.mask();
      std::vector<int32_t> allowed;
      for (size_t w = 0; w < mask.size(); ++w)
        for (uint64_t b = mask[w]; b; b &= b - 1)
          allowed.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(b))));
      ASSERT_FALSE(allowed.empty()) << "stuck after: " << out;
      int32_t pick = -1;
      for (int32_t t : allowed)
        if (trie->is_eog(t)) pick = t;
      if (pick < 0 && rng() % 4 != 0) {
        // Closing tokens first (a quote ends a string, then brackets), else a random one.
        for (const char* close : {"\"", "}", "]"})
          for (int32_t t : allowed)
            if (pick < 0 && trie->piece(t) == close) pick = t;
      }
      if (pick < 0) pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept(pick));
      if (!trie->is_eog(pick)) out += trie->piece(pick);
    }
    if (m.finished()) {
      ++complete;
      EXPECT_TRUE(json::accept(out)) << out;
    }
  }
  EXPECT_GE(complete * 10, static_cast<int>(files.size()) * 9);
}

}  // namespace
}  // namespace rocky::grammar
