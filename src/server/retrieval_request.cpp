#include "server/retrieval_request.hpp"

#include <fmt/format.h>

#include <limits>

#include "server/json_fields.hpp"

namespace rocky::server {

using json = nlohmann::ordered_json;
using namespace fields;

namespace {

constexpr int64_t k_token_max = std::numeric_limits<int32_t>::max();

bool is_int(const json& v) { return v.is_number_integer() || v.is_number_unsigned(); }

std::vector<int32_t> token_ids(const json& a, const std::string& param) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < a.size(); ++i) {
    const json& t = a[i];
    const std::string p = fmt::format("{}[{}]", param, i);
    if (!is_int(t)) bad_type(p, "a token id (an integer)", t);
    if (t.is_number_unsigned() ? t.get<uint64_t>() > static_cast<uint64_t>(k_token_max) : t.get<int64_t>() < 0)
      bad_value(p, "is not a token id");
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return out;
}

std::string infill_text(const json& o, const char* key) {
  const json* v = get(o, key);
  if (!v) return {};
  if (!v->is_string()) bad_type(key, "a string", *v);
  return v->get<std::string>();
}

}  // namespace

InfillRequest parse_infill(const json& o) {
  InfillRequest r;
  r.input_prefix = infill_text(o, "input_prefix");
  r.input_suffix = infill_text(o, "input_suffix");
  if (const json* ex = get(o, "input_extra")) {
    if (!ex->is_array()) bad_type("input_extra", "an array of {\"filename\": string, \"text\": string}", *ex);
    for (size_t i = 0; i < ex->size(); ++i) {
      const std::string p = fmt::format("input_extra[{}]", i);
      const json& c = (*ex)[i];
      if (!c.is_object()) bad_type(p, "an object {\"filename\": string, \"text\": string}", c);
      for (const auto& [k, v] : c.items())
        if (k != "filename" && k != "text") bad_value(p, fmt::format("has the field '{}' (only filename and text)", k));
      InfillChunk chunk;
      chunk.filename = string_at(c, "filename", p + ".filename", false, "tmp");
      chunk.text = string_at(c, "text", p + ".text", false);
      r.input_extra.push_back(std::move(chunk));
    }
  }
  // The rest is /completion's: its prompt (the text right before the cursor's completion) may be
  // absent here.
  json rest = o;
  if (!get(rest, "prompt") && !get(rest, "content")) rest["prompt"] = "";
  if (const json* p = get(rest, "prompt"); p && p->is_array() && p->empty()) rest["prompt"] = "";
  r.completion = parse_completion(rest, true);
  return r;
}

EmbeddingRequest parse_embeddings(const json& o, bool oai) {
  EmbeddingRequest r;
  r.model = string_at(o, "model", "model", false);
  const char* key = get(o, "input") || oai ? "input" : "content";
  const json* in = get(o, key);
  if (!in)
    throw ApiError(400, oai ? "'input' is required" : "'content' (or 'input') is required", key,
                   "missing_required_parameter");
  const std::string k = key;
  if (in->is_string()) {
    r.inputs.push_back({in->get<std::string>(), {}, k});
  } else if (in->is_array()) {
    if (in->empty()) bad_value(k, "must not be empty");
    if (is_int((*in)[0])) {
      r.inputs.push_back({std::nullopt, token_ids(*in, k), k});
    } else {
      for (size_t i = 0; i < in->size(); ++i) {
        const json& v = (*in)[i];
        const std::string p = fmt::format("{}[{}]", k, i);
        if (v.is_string())
          r.inputs.push_back({v.get<std::string>(), {}, p});
        else if (v.is_array())
          r.inputs.push_back({std::nullopt, token_ids(v, p), p});
        else
          bad_type(p, "a string or a list of token ids", v);
      }
    }
  } else {
    bad_type(k, "a string, a list of strings or a list of token ids", *in);
  }
  for (const TextOrTokens& t : r.inputs)
    if (t.text ? t.text->empty() : t.tokens.empty()) bad_value(t.param, "must not be empty");
  const std::string enc = string_at(o, "encoding_format", "encoding_format", false, "float");
  if (enc != "float" && enc != "base64")
    bad_value("encoding_format", fmt::format("must be 'float' or 'base64' (got '{}')", enc));
  r.base64 = enc == "base64";
  if (get(o, "dimensions"))
    throw ApiError(400, "'dimensions' is not supported: the model's embedding size is fixed", "dimensions",
                   "unsupported_value");
  r.embd_normalize = static_cast<int>(int_at(o, "embd_normalize", "embd_normalize", -1, 64).value_or(2));
  return r;
}

RerankRequest parse_rerank(const json& o) {
  RerankRequest r;
  r.model = string_at(o, "model", "model", false);
  r.query = string_at(o, "query", "query", true);
  const json* docs = get(o, "documents");
  const char* key = "documents";
  if (!docs && get(o, "texts")) {  // TEI's name, as llama-server takes it
    docs = get(o, "texts");
    key = "texts";
  }
  if (!docs) throw ApiError(400, "'documents' is required", "documents", "missing_required_parameter");
  if (!docs->is_array()) bad_type(key, "an array of strings", *docs);
  if (docs->empty()) bad_value(key, "must not be empty");
  for (size_t i = 0; i < docs->size(); ++i) {
    const std::string p = fmt::format("{}[{}]", key, i);
    const json& d = (*docs)[i];
    if (d.is_string())
      r.documents.push_back(d.get<std::string>());
    else if (d.is_object())  // Cohere's {"text": …}
      r.documents.push_back(string_at(d, "text", p + ".text", true));
    else
      bad_type(p, "a string", d);
  }
  r.top_n = int_at(o, "top_n", "top_n", 1, k_token_max).value_or(-1);
  r.return_documents = bool_at(o, "return_documents", "return_documents", true);
  return r;
}

}  // namespace rocky::server
