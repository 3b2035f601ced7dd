// Small typed readers of request fields for the agent APIs (anthropic.cpp, openai_responses.cpp):
// each names the offending field in its ApiError ("messages[2].content[0].type"). Header-only.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/request.hpp"

namespace rocky::server::fields {

using json = nlohmann::ordered_json;

inline const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    case json::value_t::number_float: return "number";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    default: return "value";
  }
}

[[noreturn]] inline void bad_type(const std::string& param, const char* want, const json& got) {
  throw ApiError(400, fmt::format("'{}' must be {} (got {})", param, want, type_name(got)), param, "invalid_type");
}
[[noreturn]] inline void bad_value(const std::string& param, const std::string& why) {
  throw ApiError(400, fmt::format("'{}' {}", param, why), param, "invalid_value");
}

// The field, or nullptr when it is absent or null.
inline const json* get(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return nullptr;
  return &*it;
}

inline const json& object_at(const json& o, const char* key, const std::string& param) {
  const json* v = get(o, key);
  if (!v) throw ApiError(400, fmt::format("'{}' is required", param), param, "missing_required_parameter");
  if (!v->is_object()) bad_type(param, "an object", *v);
  return *v;
}

inline std::string string_at(const json& o, const char* key, const std::string& param, bool required,
                             const std::string& dflt = {}) {
  const json* v = get(o, key);
  if (!v) {
    if (required) throw ApiError(400, fmt::format("'{}' is required", param), param, "missing_required_parameter");
    return dflt;
  }
  if (!v->is_string()) bad_type(param, "a string", *v);
  return v->get<std::string>();
}

inline bool bool_at(const json& o, const char* key, const std::string& param, bool dflt) {
  const json* v = get(o, key);
  if (!v) return dflt;
  if (!v->is_boolean()) bad_type(param, "a boolean", *v);
  return v->get<bool>();
}

inline std::optional<double> number_at(const json& o, const char* key, const std::string& param, double lo, double hi) {
  const json* v = get(o, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad_type(param, "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    bad_value(param, fmt::format("must be between {} and {} (got {})", lo, hi, d));
  return d;
}

inline std::optional<int64_t> int_at(const json& o, const char* key, const std::string& param, int64_t lo, int64_t hi) {
  const json* v = get(o, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer() && !v->is_number_unsigned()) bad_type(param, "an integer", *v);
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
    bad_value(param, fmt::format("must be between {} and {}", lo, hi));
  const int64_t i = v->get<int64_t>();
  if (i < lo || i > hi) bad_value(param, fmt::format("must be between {} and {} (got {})", lo, hi, i));
  return i;
}

}  // namespace rocky::server::fields
