// JSON Schema → GBNF, covering what llama.cpp's json-schema-to-grammar covers (rocky's own code):
//
//   type (a name or a list), properties / required / additionalProperties (false, true or a schema),
//   enum / const, anyOf / oneOf (alternatives), allOf (merged), local $ref into $defs / definitions
//   (JSON pointers, recursion allowed), items / prefixItems / minItems / maxItems, string minLength /
//   maxLength / pattern (a regex subset: literals, ., [classes], groups, |, ? * + {m,n}, \d \w \s)
//   and format date / time / date-time / uuid / email, integer and number minimum / maximum /
//   exclusiveMinimum / exclusiveMaximum.
//
// The grammar writes compact JSON (one optional space after separators), properties in declaration
// order with the required ones always present, and only valid instances: dates are real calendar
// days, numbers inside their bounds (bounded numbers are written without an exponent). Where a
// schema allows more than the grammar writes, the grammar writes a subset:
//   - a string's maxLength above minLength + k_max_string_span is written at most
//     minLength + k_max_string_span characters long (the grammar stays small and fast);
//   - an array without maxItems (or a larger one) is written with at most minItems +
//     k_max_array_span items (a small model otherwise tends to list items until its token budget
//     ends);
//   - properties not declared are written only when additionalProperties says so explicitly.
// Annotations ($schema, $id, title, description, default, examples, $comment, readOnly, writeOnly,
// deprecated) and keywords unknown to JSON Schema are ignored. A JSON Schema keyword the converter
// does not implement (multipleOf, uniqueItems, not, if/then/else, patternProperties, …), a format
// other than the five above or an unresolvable $ref is a rocky::Error naming it with the JSON
// pointer of its place ("at /properties/age: unsupported keyword 'multipleOf'").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace rocky::grammar {

inline constexpr int k_max_string_span = 64;
inline constexpr int k_max_array_span = 8;

// GBNF text whose `root` rule matches the JSON instances of `schema` (plus nothing else). With a
// `prefix`, every rule name (root included) starts with it, so that several schemas can share one
// grammar (a tool call per tool: prefix "t0-" gives the rule "t0-root").
std::string json_schema_to_gbnf(const nlohmann::json& schema, const std::string& prefix = "");

// GBNF for any JSON object ({"type": "json_object"} in OpenAI's response_format).
std::string json_object_gbnf();

}  // namespace rocky::grammar
