#include "server/request.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <functional>
#include <limits>

#include "core/error.hpp"
#include "grammar/gbnf.hpp"
#include "grammar/json_schema.hpp"
#include "server/json_fields.hpp"

namespace rocky::server {
using json = nlohmann::ordered_json;

namespace {

using fields::bad_type;
using fields::bad_value;
using fields::type_name;

const json* field(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return nullptr;
  return &*it;
}

bool get_bool(const json& o, const char* key, bool dflt) {
  const json* v = field(o, key);
  if (!v) return dflt;
  if (!v->is_boolean()) bad_type(key, "a boolean", *v);
  return v->get<bool>();
}

std::string get_string(const json& o, const char* key, const std::string& dflt, const std::string& param = {}) {
  const json* v = field(o, key);
  if (!v) return dflt;
  if (!v->is_string()) bad_type(param.empty() ? key : param, "a string", *v);
  return v->get<std::string>();
}

std::optional<double> get_number(const json& o, const char* key, double lo, double hi) {
  const json* v = field(o, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad_type(key, "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    bad_value(key, fmt::format("must be between {} and {} (got {})", lo, hi, d));
  return d;
}

// An integer field; a float with an integral value (1.0) is accepted, as Python clients send them.
std::optional<int64_t> get_int(const json& o, const char* key, int64_t lo, int64_t hi) {
  const json* v = field(o, key);
  if (!v) return std::nullopt;
  int64_t i = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      bad_value(key, fmt::format("is too large: {} (at most {})", v->get<uint64_t>(), hi));
    i = v->get<int64_t>();
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) bad_type(key, "an integer", *v);
    i = static_cast<int64_t>(d);
  } else {
    bad_type(key, "an integer", *v);
  }
  if (i < lo || i > hi) bad_value(key, fmt::format("must be between {} and {} (got {})", lo, hi, i));
  return i;
}

constexpr int64_t k_max_tokens_limit = 1 << 24;  // beyond any context: a client bug, not a request

// -1 (or absent) = no limit; get_int names the field and the bounds (values past int64 too).
int64_t parse_max_tokens(const json& o, const char* key) {
  return get_int(o, key, -1, k_max_tokens_limit).value_or(-1);
}

std::vector<std::string> parse_stop(const json& o) {
  std::vector<std::string> out;
  const json* v = field(o, "stop");
  if (!v) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > 16) bad_value("stop", fmt::format("has {} entries (at most 16)", v->size()));
    for (size_t i = 0; i < v->size(); ++i) {
      const json& s = (*v)[i];
      if (!s.is_string()) bad_type(fmt::format("stop[{}]", i), "a string", s);
      out.push_back(s.get<std::string>());
    }
  } else {
    bad_type("stop", "a string or a list of strings", *v);
  }
  return out;
}

}  // namespace

std::string checked_gbnf(const std::string& param, const std::function<std::string()>& make) {
  std::string gbnf;
  try {
    gbnf = make();
    (void)grammar::parse_gbnf(gbnf);
  } catch (const Error& e) {
    throw ApiError(400, fmt::format("'{}': {}", param, e.what()), param, "invalid_value");
  }
  return gbnf;
}

namespace {

// `grammar`, `json_schema`, `response_format` → GBNF in s.grammar (at most one; each checked).
void parse_constraint(const json& o, SamplingFields& s) {
  std::vector<std::string> given;
  auto set = [&](const std::string& param, const std::function<std::string()>& make) {
    given.push_back(param);
    if (given.size() > 1)
      throw ApiError(400,
                     fmt::format("'{}' and '{}' both constrain the output; send only one of them", given[0], given[1]),
                     given[1], "invalid_value");
    s.grammar = checked_gbnf(param, make);
    s.grammar_param = param;
  };
  if (const json* v = field(o, "grammar"); v && !v->is_null()) {
    if (!v->is_string()) bad_type("grammar", "a string", *v);
    if (!v->get<std::string>().empty()) set("grammar", [&] { return v->get<std::string>(); });
  }
  if (const json* v = field(o, "json_schema"); v && !v->is_null()) {
    if (!v->is_object() && !v->is_boolean()) bad_type("json_schema", "an object", *v);
    set("json_schema", [&] { return grammar::json_schema_to_gbnf(nlohmann::json::parse(v->dump())); });
  }
  if (const json* rf = field(o, "response_format"); rf && !rf->is_null()) {
    if (!rf->is_object()) bad_type("response_format", "an object", *rf);
    const std::string t = get_string(*rf, "type", "text", "response_format.type");
    if (t == "json_object") {
      if (const json* sc = field(*rf, "schema"); sc && !sc->is_null()) {  // llama-server's extension
        if (!sc->is_object()) bad_type("response_format.schema", "an object", *sc);
        set("response_format.schema", [&] { return grammar::json_schema_to_gbnf(nlohmann::json::parse(sc->dump())); });
      } else {
        set("response_format", [] { return grammar::json_object_gbnf(); });
      }
    } else if (t == "json_schema") {
      const json* js = field(*rf, "json_schema");
      if (!js || !js->is_object()) bad_type("response_format.json_schema", "an object", js ? *js : json());
      if (const json* st = field(*js, "strict"); st && !st->is_null() && !st->is_boolean())
        bad_type("response_format.json_schema.strict", "a boolean", *st);
      const json* sc = field(*js, "schema");
      if (!sc)
        throw ApiError(400, "'response_format.json_schema.schema' is missing", "response_format.json_schema.schema",
                       "missing_field");
      if (!sc->is_object() && !sc->is_boolean()) bad_type("response_format.json_schema.schema", "an object", *sc);
      set("response_format.json_schema.schema",
          [&] { return grammar::json_schema_to_gbnf(nlohmann::json::parse(sc->dump())); });
    } else if (t != "text") {
      bad_value("response_format.type", fmt::format("is '{}': must be text, json_object or json_schema", t));
    }
  }
}

// A bias value: a number, or false (llama-server: never sample the token) → -inf.
double bias_value(const json& v, const std::string& param) {
  if (v.is_boolean()) {
    if (v.get<bool>()) bad_value(param, "must be a number or false (true has no meaning)");
    return -std::numeric_limits<double>::infinity();
  }
  if (!v.is_number()) bad_type(param, "a number or false", v);
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad_value(param, "must be finite");
  return d;
}

// A key or entry naming a token: an id (integer, or a string of digits as OpenAI's JSON keys are),
// else a text to tokenize (llama-server's form).
LogitBias bias_target(const json& k, const std::string& param) {
  LogitBias b;
  b.param = param;
  if (k.is_number_integer()) {
    b.id = k.get<int64_t>();
    if (b.id < 0) bad_value(param, fmt::format("is {}, not a token id", b.id));
  } else if (k.is_string()) {
    const std::string t = k.get<std::string>();
    bool digits = !t.empty() && t.size() <= 9;
    for (char c : t) digits = digits && c >= '0' && c <= '9';
    if (digits)
      b.id = std::stoll(t);
    else if (t.empty())
      bad_value(param, "is an empty string (a token id or a text)");
    else
      b.text = t;
  } else {
    bad_type(param, "a token id or a string", k);
  }
  return b;
}

// OpenAI: {"15043": -100}; llama-server also: [[15043, 1.0], ["Hello", false]] and text keys.
std::vector<LogitBias> parse_logit_bias(const json& o) {
  std::vector<LogitBias> out;
  const json* v = field(o, "logit_bias");
  if (!v) return out;
  if (v->is_object()) {
    if (v->size() > 1024) bad_value("logit_bias", fmt::format("has {} entries (at most 1024)", v->size()));
    for (const auto& [k, b] : v->items()) {
      const std::string param = "logit_bias." + k;
      LogitBias e = bias_target(json(k), param);
      e.bias = bias_value(b, param);
      out.push_back(std::move(e));
    }
  } else if (v->is_array()) {
    if (v->size() > 1024) bad_value("logit_bias", fmt::format("has {} entries (at most 1024)", v->size()));
    for (size_t i = 0; i < v->size(); ++i) {
      const std::string param = fmt::format("logit_bias[{}]", i);
      const json& p = (*v)[i];
      if (!p.is_array() || p.size() != 2) bad_type(param, "a [token, bias] pair", p);
      LogitBias e = bias_target(p[0], param + "[0]");
      e.bias = bias_value(p[1], param + "[1]");
      out.push_back(std::move(e));
    }
  } else {
    bad_type("logit_bias", "an object of token → bias or a list of [token, bias] pairs", *v);
  }
  return out;
}

// llama-server's per-request speculation fields: "speculative.n_max" etc. as flat keys (its form),
// or {"speculative": {"n_max": …}}; an unknown speculative.* field is an error naming it.
void parse_speculative(const json& o, SamplingFields& s) {
  json flat = json::object();
  auto take = [&](const std::string& name, const json& v) {
    static const char* const k_known[] = {"n_max", "n_min", "p_min"};
    if (std::find(std::begin(k_known), std::end(k_known), name) == std::end(k_known))
      bad_value("speculative." + name, "is not a speculative decoding field (n_max, n_min, p_min)");
    const std::string key = "speculative." + name;
    if (flat.contains(key)) bad_value(key, "is given twice (as a dotted key and inside \"speculative\")");
    flat[key] = v;
  };
  for (const auto& [k, v] : o.items())
    if (k.rfind("speculative.", 0) == 0 && !v.is_null()) take(k.substr(12), v);
  if (const json* sp = field(o, "speculative")) {
    if (!sp->is_object()) bad_type("speculative", "an object", *sp);
    for (const auto& [k, v] : sp->items())
      if (!v.is_null()) take(k, v);
  }
  if (flat.empty()) return;
  s.spec_param = flat.begin().key();
  s.spec_n_max = get_int(flat, "speculative.n_max", 0, 256);
  s.spec_n_min = get_int(flat, "speculative.n_min", 0, 256);
  s.spec_p_min = get_number(flat, "speculative.p_min", 0.0, 1.0);
  if (s.spec_n_max && s.spec_n_min && *s.spec_n_min > *s.spec_n_max)
    bad_value("speculative.n_min", fmt::format("is {}, above speculative.n_max {}", *s.spec_n_min, *s.spec_n_max));
}

SamplingFields parse_sampling(const json& o, bool native, bool chat) {
  SamplingFields s;
  s.temperature = get_number(o, "temperature", 0.0, 1.0e4);
  s.top_p = get_number(o, "top_p", 0.0, 1.0);
  s.min_p = get_number(o, "min_p", 0.0, 1.0);
  s.repeat_penalty = get_number(o, "repeat_penalty", 0.0, 1.0e4);
  s.top_k = get_int(o, "top_k", -1, std::numeric_limits<int32_t>::max());
  s.repeat_last_n = get_int(o, "repeat_last_n", -1, std::numeric_limits<int32_t>::max());
  s.seed = get_int(o, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  s.cache_prompt = get_bool(o, "cache_prompt", true);
  s.return_tokens = get_bool(o, "return_tokens", false);
  // Token log-probabilities (n_probs: -1 off, N ≥ 0 the top alternatives per token). Chat:
  // logprobs true + top_logprobs N (OpenAI); completions: logprobs N (OpenAI's legacy integer);
  // native: n_probs N (llama-server).
  constexpr int64_t k_max_top = 20;
  if (const json* l = field(o, "logprobs")) {
    if (chat) {
      if (!l->is_boolean()) bad_type("logprobs", "a boolean", *l);
      if (l->get<bool>()) s.n_probs = get_int(o, "top_logprobs", 0, k_max_top).value_or(0);
    } else if (l->is_boolean()) {  // llama-server also takes a boolean here
      if (l->get<bool>()) s.n_probs = 0;
    } else {
      s.n_probs = *get_int(o, "logprobs", 0, k_max_top);
    }
  }
  if (const json* t = field(o, "top_logprobs"); t && s.n_probs < 0) {
    if (get_int(o, "top_logprobs", 0, k_max_top).value_or(0) > 0) bad_value("top_logprobs", "needs \"logprobs\": true");
  }
  if (const auto n = get_int(o, "n_probs", 0, k_max_top); n && *n > 0) s.n_probs = *n;  // every endpoint
  // Fields that would change what is generated but are not implemented: their neutral values pass
  // (SDKs and agent frameworks send presence_penalty 0, logit_bias {}), anything else is an error
  // naming the field — never a 200 that silently ignored it.
  auto neutral_number = [&](const char* name, double neutral) {
    const json* v = field(o, name);
    if (!v || v->is_null()) return;
    if (!v->is_number()) bad_type(name, "a number", *v);
    if (v->get<double>() != neutral) bad_value(name, fmt::format("is not supported (only {} is accepted)", neutral));
  };
  s.presence_penalty = get_number(o, "presence_penalty", -2.0, 2.0);
  s.frequency_penalty = get_number(o, "frequency_penalty", -2.0, 2.0);
  neutral_number("best_of", 1);
  // llama-server's fields rocky's sampler does not have: dynamic temperature, min_keep and the
  // post-sampling probabilities.
  neutral_number("dynatemp_range", 0);
  neutral_number("dynatemp_exponent", 1);
  neutral_number("min_keep", 0);
  if (get_bool(o, "post_sampling_probs", false))
    bad_value("post_sampling_probs", "is not supported (probabilities are the model's, before sampling)");
  s.typical_p = get_number(o, "typical_p", 0.0, 1.0);
  s.top_n_sigma = get_number(o, "top_n_sigma", -1.0, 1.0e4);
  s.xtc_probability = get_number(o, "xtc_probability", 0.0, 1.0);
  s.xtc_threshold = get_number(o, "xtc_threshold", 0.0, 1.0);
  s.dry_multiplier = get_number(o, "dry_multiplier", 0.0, 1.0e4);
  s.dry_base = get_number(o, "dry_base", 1.0, 1.0e4);
  s.dry_allowed_length = get_int(o, "dry_allowed_length", 0, std::numeric_limits<int32_t>::max());
  s.dry_penalty_last_n = get_int(o, "dry_penalty_last_n", -1, std::numeric_limits<int32_t>::max());
  if (const json* v = field(o, "dry_sequence_breakers")) {
    if (!v->is_array()) bad_type("dry_sequence_breakers", "a list of strings", *v);
    if (v->empty()) bad_value("dry_sequence_breakers", "must not be empty (llama-server's rule)");
    if (v->size() > 64) bad_value("dry_sequence_breakers", fmt::format("has {} entries (at most 64)", v->size()));
    s.dry_sequence_breakers.emplace();
    for (size_t i = 0; i < v->size(); ++i) {
      const json& b = (*v)[i];
      const std::string p = fmt::format("dry_sequence_breakers[{}]", i);
      if (!b.is_string()) bad_type(p, "a string", b);
      if (b.get<std::string>().empty()) bad_value(p, "must not be empty");
      s.dry_sequence_breakers->push_back(b.get<std::string>());
    }
  }
  s.mirostat = get_int(o, "mirostat", 0, 2);
  s.mirostat_tau = get_number(o, "mirostat_tau", 0.0, 1.0e4);
  s.mirostat_eta = get_number(o, "mirostat_eta", 0.0, 1.0e4);
  // The chain's order: llama-server's list of names, or a string of their letters ("edskypmxt").
  if (const json* v = field(o, "samplers")) {
    std::vector<runtime::SamplerKind> order;
    auto bad_name = [](const std::string& p, const std::string& name) {
      bad_value(p, fmt::format("is '{}': not a sampler (penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, "
                               "temperature{})",
                               name, name == "infill" || name == "i" ? "; infill is not supported" : ""));
    };
    if (v->is_array()) {
      if (v->size() > 64) bad_value("samplers", fmt::format("has {} entries (at most 64)", v->size()));
      for (size_t i = 0; i < v->size(); ++i) {
        const json& n = (*v)[i];
        const std::string p = fmt::format("samplers[{}]", i);
        if (!n.is_string()) bad_type(p, "a string", n);
        const auto k = runtime::sampler_from_name(n.get<std::string>());
        if (!k) bad_name(p, n.get<std::string>());
        order.push_back(*k);
      }
    } else if (v->is_string()) {
      const std::string chars = v->get<std::string>();
      if (chars.size() > 64) bad_value("samplers", fmt::format("has {} letters (at most 64)", chars.size()));
      for (char c : chars) {
        const auto k = runtime::sampler_from_char(c);
        if (!k) bad_name("samplers", std::string(1, c));
        order.push_back(*k);
      }
    } else {
      bad_type("samplers", "a list of sampler names or a string of their letters", *v);
    }
    s.samplers = std::move(order);
  }
  s.id_slot = get_int(o, "id_slot", -1, std::numeric_limits<int32_t>::max()).value_or(-1);
  s.t_max_predict_ms = get_int(o, "t_max_predict_ms", 0, std::numeric_limits<int32_t>::max()).value_or(0);
  s.logit_bias = parse_logit_bias(o);
  parse_constraint(o, s);
  // max_completion_tokens (the current OpenAI name) wins over max_tokens (deprecated there).
  if (field(o, "max_completion_tokens"))
    s.max_tokens = parse_max_tokens(o, "max_completion_tokens");
  else if (field(o, "max_tokens"))
    s.max_tokens = parse_max_tokens(o, "max_tokens");
  else if (native && field(o, "n_predict"))
    s.max_tokens = parse_max_tokens(o, "n_predict");
  if (native && field(o, "n_predict") && (field(o, "max_tokens") || field(o, "max_completion_tokens")))
    parse_max_tokens(o, "n_predict");  // still type-checked
  s.stop = parse_stop(o);
  s.ignore_eos = get_bool(o, "ignore_eos", false);
  s.n = get_int(o, "n", 1, 16).value_or(1);
  parse_speculative(o, s);
  return s;
}

void parse_stream(const json& o, bool& stream, bool& include_usage) {
  stream = get_bool(o, "stream", false);
  include_usage = false;
  if (const json* so = field(o, "stream_options")) {
    if (!so->is_object()) bad_type("stream_options", "an object", *so);
    if (const json* iu = field(*so, "include_usage")) {
      if (!iu->is_boolean()) bad_type("stream_options.include_usage", "a boolean", *iu);
      include_usage = iu->get<bool>();
    }
  }
}

void check_text_parts(const json& content, const std::string& param) {
  for (size_t j = 0; j < content.size(); ++j) {
    const json& part = content[j];
    const std::string p = fmt::format("{}[{}]", param, j);
    if (!part.is_object()) bad_type(p, "an object", part);
    const json* t = field(part, "type");
    if (!t || !t->is_string()) bad_type(p + ".type", "a string", t ? *t : json());
    if (t->get<std::string>() != "text")
      throw ApiError(
          400, fmt::format("'{}.type' is '{}': only \"text\" content parts are supported", p, t->get<std::string>()),
          p + ".type", "unsupported_value");
    const json* text = field(part, "text");
    if (!text || !text->is_string()) bad_type(p + ".text", "a string", text ? *text : json());
  }
}

void check_tool_calls(const json& calls, const std::string& param) {
  if (!calls.is_array()) bad_type(param, "a list", calls);
  for (size_t j = 0; j < calls.size(); ++j) {
    const json& c = calls[j];
    const std::string p = fmt::format("{}[{}]", param, j);
    if (!c.is_object()) bad_type(p, "an object", c);
    const json* fn = field(c, "function");
    if (!fn || !fn->is_object()) bad_type(p + ".function", "an object", fn ? *fn : json());
    const json* name = field(*fn, "name");
    if (!name || !name->is_string()) bad_type(p + ".function.name", "a string", name ? *name : json());
    if (const json* args = field(*fn, "arguments"); args && !args->is_string() && !args->is_object())
      bad_type(p + ".function.arguments", "a string or an object", *args);
    if (const json* id = field(c, "id"); id && !id->is_string()) bad_type(p + ".id", "a string", *id);
  }
}

void check_messages(const json& msgs) {
  if (!msgs.is_array()) bad_type("messages", "a list", msgs);
  if (msgs.empty()) bad_value("messages", "must not be empty");
  for (size_t i = 0; i < msgs.size(); ++i) {
    const json& m = msgs[i];
    const std::string p = fmt::format("messages[{}]", i);
    if (!m.is_object()) bad_type(p, "an object", m);
    const json* role = field(m, "role");
    if (!role) throw ApiError(400, fmt::format("'{}.role' is missing", p), p + ".role", "missing_field");
    if (!role->is_string()) bad_type(p + ".role", "a string", *role);
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool")
      bad_value(p + ".role", fmt::format("is '{}': must be system, developer, user, assistant or tool", r));
    const bool has_calls = field(m, "tool_calls") != nullptr;
    if (has_calls) {
      if (r != "assistant") bad_value(p + ".tool_calls", "is only allowed on assistant messages");
      check_tool_calls(m.at("tool_calls"), p + ".tool_calls");
    }
    const json* content = field(m, "content");
    if (!content) {
      if (r != "assistant")
        throw ApiError(400, fmt::format("'{}.content' is missing", p), p + ".content", "missing_field");
    } else if (content->is_array()) {
      check_text_parts(*content, p + ".content");
    } else if (!content->is_string()) {
      bad_type(p + ".content", "a string, null or a list of text parts", *content);
    }
    for (const char* k : {"name", "tool_call_id", "reasoning_content"})
      if (const json* v = field(m, k); v && !v->is_string()) bad_type(p + "." + k, "a string", *v);
  }
}

void check_tools(const json& tools) {
  if (!tools.is_array()) bad_type("tools", "a list", tools);
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string p = fmt::format("tools[{}]", i);
    if (!t.is_object()) bad_type(p, "an object", t);
    const std::string type = get_string(t, "type", "function", p + ".type");
    if (type != "function") bad_value(p + ".type", fmt::format("is '{}': only \"function\" tools are supported", type));
    const json* fn = field(t, "function");
    if (!fn || !fn->is_object()) bad_type(p + ".function", "an object", fn ? *fn : json());
    const json* name = field(*fn, "name");
    if (!name || !name->is_string()) bad_type(p + ".function.name", "a string", name ? *name : json());
    if (name->get<std::string>().empty()) bad_value(p + ".function.name", "must not be empty");
    if (const json* d = field(*fn, "description"); d && !d->is_string())
      bad_type(p + ".function.description", "a string", *d);
    if (const json* ps = field(*fn, "parameters"); ps && !ps->is_object())
      bad_type(p + ".function.parameters", "an object", *ps);
  }
}

json kwargs_of(const json& o) {
  const json* k = field(o, "chat_template_kwargs");
  if (!k) return json::object();
  if (!k->is_object()) bad_type("chat_template_kwargs", "an object", *k);
  return *k;
}

std::vector<int32_t> token_list(const json& v, const std::string& param) {
  std::vector<int32_t> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const json& t = v[i];
    const std::string p = fmt::format("{}[{}]", param, i);
    if (!t.is_number_integer()) bad_type(p, "an integer token id", t);
    if (t.is_number_unsigned() ? t.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())
                               : (t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max()))
      bad_value(p, "is not a token id");
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return out;
}

}  // namespace

json ApiError::to_json() const {
  json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  for (const auto& [k, v] : extra.items()) e[k] = v;
  return json{{"error", e}};
}

size_t find_invalid_utf8(std::string_view s) {
  size_t i = 0;
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size()) {
    const unsigned c = b[i];
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 4, cp = c & 0x07;
    } else {
      return i;
    }
    if (i + n > s.size()) return i;
    for (size_t k = 1; k < n; ++k) {
      if ((b[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (b[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid.
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return i;
    i += n;
  }
  return std::string_view::npos;
}

json parse_body(std::string_view body) {
  if (const size_t bad = find_invalid_utf8(body); bad != std::string_view::npos)
    throw ApiError(400, fmt::format("the request body is not valid UTF-8 (byte offset {})", bad), "", "invalid_utf8");
  json j;
  try {
    j = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()), "", "invalid_json");
  }
  if (!j.is_object())
    throw ApiError(400, fmt::format("the request body must be a JSON object (got {})", type_name(j)), "",
                   "invalid_type");
  return j;
}

// add_generation_prompt / continue_final_message of a chat body (chat completions and
// /apply-template alike): a final assistant message is continued (prefilled) unless the body says
// otherwise; both true is a 400 (transformers'), and so is continuing without a final assistant
// message.
namespace {
void template_mode(const json& o, const json& msgs, bool& add_generation_prompt, bool& continue_final_message) {
  const bool ends_with_assistant = !msgs.empty() && msgs.back().value("role", json()) == json("assistant");
  const bool agp_given = field(o, "add_generation_prompt") != nullptr;
  continue_final_message = get_bool(o, "continue_final_message", ends_with_assistant && !agp_given);
  add_generation_prompt = get_bool(o, "add_generation_prompt", !continue_final_message);
  if (continue_final_message && add_generation_prompt)
    throw ApiError(400,
                   "continue_final_message and add_generation_prompt are not compatible: use continue_final_message "
                   "to continue the final message, add_generation_prompt to start a new assistant message",
                   "continue_final_message", "invalid_value");
  if (continue_final_message && !ends_with_assistant)
    bad_value("continue_final_message", "needs a final assistant message to continue");
}
}  // namespace

ChatRequest parse_chat(const json& o) {
  ChatRequest r;
  r.model = get_string(o, "model", "");
  const json* msgs = field(o, "messages");
  if (!msgs) throw ApiError(400, "'messages' is missing", "messages", "missing_field");
  check_messages(*msgs);
  r.messages = *msgs;
  if (const json* t = field(o, "tools")) {
    check_tools(*t);
    if (!t->empty()) r.tools = *t;
  }
  if (const json* tc = field(o, "tool_choice"); tc && !tc->is_null()) {
    if (tc->is_string()) {
      const std::string s = tc->get<std::string>();
      if (s != "auto" && s != "none" && s != "required")
        bad_value("tool_choice", fmt::format("is '{}': must be auto, none, required or a named function", s));
      r.tool_choice = s;
    } else if (tc->is_object()) {
      const json* fn = field(*tc, "function");
      if (!fn || !fn->is_object() || !field(*fn, "name") || !(*fn)["name"].is_string())
        bad_type("tool_choice.function.name", "a string",
                 fn && fn->is_object() && field(*fn, "name") ? (*fn)["name"] : json());
      r.tool_choice = "function";
      r.tool_choice_name = (*fn)["name"].get<std::string>();
    } else {
      bad_type("tool_choice", "a string or an object", *tc);
    }
    if ((r.tool_choice == "required" || r.tool_choice == "function") && r.tools.is_null())
      bad_value("tool_choice", fmt::format("is '{}' but the request has no tools",
                                           r.tool_choice == "function" ? r.tool_choice_name : r.tool_choice));
    if (r.tool_choice == "function") {
      bool found = false;
      for (const auto& t : r.tools)
        if (t.contains("function") && t["function"].value("name", "") == r.tool_choice_name) found = true;
      if (!found)
        bad_value("tool_choice.function.name",
                  fmt::format("'{}' is not one of the request's tools", r.tool_choice_name));
    }
  }
  r.parallel_tool_calls = get_bool(o, "parallel_tool_calls", true);
  r.chat_template_kwargs = kwargs_of(o);
  template_mode(o, *msgs, r.add_generation_prompt, r.continue_final_message);
  parse_stream(o, r.stream, r.include_usage);
  r.sampling = parse_sampling(o, false, true);
  if ((r.tool_choice == "required" || r.tool_choice == "function") && !r.sampling.grammar.empty())
    throw ApiError(400,
                   fmt::format("'tool_choice' and '{}' both constrain the output; send only one of them",
                               r.sampling.grammar_param),
                   "tool_choice", "invalid_value");
  return r;
}

CompletionRequest parse_completion(const json& o, bool native) {
  CompletionRequest r;
  r.model = get_string(o, "model", "");
  const json* p = field(o, native && !field(o, "prompt") && field(o, "content") ? "content" : "prompt");
  if (!p) throw ApiError(400, "'prompt' is missing", "prompt", "missing_field");
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
  } else if (p->is_array()) {
    if (p->size() == 1 && (*p)[0].is_string()) {
      r.prompt_text = (*p)[0].get<std::string>();
    } else if (!p->empty() && (*p)[0].is_array()) {
      if (p->size() != 1) bad_value("prompt", "must be one prompt: batches of prompts are not supported");
      r.prompt_tokens = token_list((*p)[0], "prompt[0]");
    } else if (!p->empty() && (*p)[0].is_string()) {
      bad_value("prompt", "must be one prompt: batches of prompts are not supported");
    } else {
      r.prompt_tokens = token_list(*p, "prompt");
    }
    if (!r.prompt_text && r.prompt_tokens.empty()) bad_value("prompt", "must not be empty");
  } else {
    bad_type("prompt", "a string or a list of token ids", *p);
  }
  parse_stream(o, r.stream, r.include_usage);
  r.cache_prompt = get_bool(o, "cache_prompt", true);
  r.sampling = parse_sampling(o, native, false);
  if (const json* e = field(o, "echo"); e && (!e->is_boolean() || e->get<bool>()))
    bad_value("echo", "is not supported");
  if (const json* s = field(o, "suffix"); s && !(s->is_string() && s->get<std::string>().empty()))
    bad_value("suffix", "is not supported");
  return r;
}

TokenizeRequest parse_tokenize(const json& o) {
  TokenizeRequest r;
  const json* c = field(o, "content");
  if (!c) throw ApiError(400, "'content' is missing", "content", "missing_field");
  if (!c->is_string()) bad_type("content", "a string", *c);
  r.content = c->get<std::string>();
  r.add_special = get_bool(o, "add_special", false);
  r.parse_special = get_bool(o, "parse_special", true);
  r.with_pieces = get_bool(o, "with_pieces", false);
  return r;
}

std::vector<int32_t> parse_detokenize(const json& o) {
  const json* t = field(o, "tokens");
  if (!t) throw ApiError(400, "'tokens' is missing", "tokens", "missing_field");
  if (!t->is_array()) bad_type("tokens", "a list of token ids", *t);
  return token_list(*t, "tokens");
}

ApplyTemplateRequest parse_apply_template(const json& o) {
  ApplyTemplateRequest r;
  const json* msgs = field(o, "messages");
  if (!msgs) throw ApiError(400, "'messages' is missing", "messages", "missing_field");
  if (!msgs->is_array()) bad_type("messages", "a list", *msgs);
  for (size_t i = 0; i < msgs->size(); ++i)
    if (!(*msgs)[i].is_object()) bad_type(fmt::format("messages[{}]", i), "an object", (*msgs)[i]);
  r.messages = *msgs;
  if (const json* t = field(o, "tools")) {
    if (!t->is_array()) bad_type("tools", "a list", *t);
    r.tools = *t;
  }
  template_mode(o, *msgs, r.add_generation_prompt, r.continue_final_message);
  r.chat_template_kwargs = kwargs_of(o);
  return r;
}

json normalise_for_template(const json& messages) {
  json out = messages;
  for (auto& m : out) {
    // content null / absent (an assistant message with tool calls) → "" (templates concatenate it).
    if (auto it = m.find("content"); it == m.end() || it->is_null()) m["content"] = "";
    if (auto it = m.find("content"); it != m.end() && it->is_array()) {
      std::string text;
      for (size_t j = 0; j < it->size(); ++j) {
        if (j) text += "\n";
        text += (*it)[j].at("text").get<std::string>();
      }
      *it = text;
    }
    if (auto it = m.find("tool_calls"); it != m.end() && it->is_array()) {
      for (auto& c : *it) {
        auto& fn = c["function"];
        if (auto a = fn.find("arguments"); a != fn.end() && a->is_string()) {
          json parsed = json::parse(a->get<std::string>(), nullptr, /*allow_exceptions=*/false);
          if (!parsed.is_discarded()) *a = parsed;
        }
      }
    }
  }
  return out;
}

}  // namespace rocky::server
