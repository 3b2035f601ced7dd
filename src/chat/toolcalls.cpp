// Tool-call and reasoning parsers (see toolcalls.hpp). One Builder walks the reply as llama.cpp's
// common_chat_msg_parser does: text before a recognised marker is content, JSON values are read
// whole, and a broken call makes the final parse fall back to plain content. In partial mode (the
// stream helper) the walk stops where the input could still turn into a marker or is an
// incomplete JSON value, so what it has produced so far is always a prefix of the final result.
#include "chat/toolcalls.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <random>

#include "core/error.hpp"

namespace rocky::chat {

const char* to_string(ToolFormat f) {
  switch (f) {
    case ToolFormat::content_only: return "content_only";
    case ToolFormat::generic: return "generic";
    case ToolFormat::hermes: return "hermes";
    case ToolFormat::llama3: return "llama3";
    case ToolFormat::llama3_builtin: return "llama3_builtin";
    case ToolFormat::mistral_nemo: return "mistral_nemo";
    case ToolFormat::deepseek_r1: return "deepseek_r1";
    case ToolFormat::granite: return "granite";
  }
  return "?";
}

const char* to_string(ReasoningFormat f) {
  switch (f) {
    case ReasoningFormat::none: return "none";
    case ReasoningFormat::auto_detect: return "auto";
    case ReasoningFormat::deepseek: return "deepseek";
  }
  return "?";
}

ReasoningFormat parse_reasoning_format(std::string_view name) {
  if (name == "auto") return ReasoningFormat::auto_detect;
  if (name == "none") return ReasoningFormat::none;
  if (name == "deepseek") return ReasoningFormat::deepseek;
  fail("--reasoning-format: unknown value '{}' (expected auto, none or deepseek)", name);
}

namespace {

bool contains(std::string_view s, std::string_view x) { return s.find(x) != std::string_view::npos; }

bool has_builtin_tool(const nlohmann::ordered_json& tools) {
  if (!tools.is_array()) return false;
  for (const auto& t : tools) {
    const nlohmann::ordered_json* fn = &t;
    if (t.is_object() && t.contains("function") && t["function"].is_object()) fn = &t["function"];
    if (!fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) continue;
    const std::string name = (*fn)["name"].get<std::string>();
    if (name == "brave_search" || name == "wolfram_alpha" || name == "web_search" || name == "python" ||
        name == "code_interpreter")
      return true;
  }
  return false;
}

}  // namespace

ToolFormat detect_tool_format(std::string_view src, const nlohmann::ordered_json& tools) {
  const bool has_tools = tools.is_array() && !tools.empty();
  if (contains(src, "<｜tool▁calls▁begin｜>")) return ToolFormat::deepseek_r1;
  if (contains(src, "elif thinking") && contains(src, "<|tool_call|>")) return ToolFormat::granite;
  if (contains(src, "<tool_call>")) return ToolFormat::hermes;
  if (contains(src, "<|start_header_id|>ipython<|end_header_id|>")) {
    if (!has_tools) return ToolFormat::content_only;
    return contains(src, "<|python_tag|>") && has_builtin_tool(tools) ? ToolFormat::llama3_builtin : ToolFormat::llama3;
  }
  if (!has_tools) return ToolFormat::content_only;
  if (contains(src, "[TOOL_CALLS]")) return ToolFormat::mistral_nemo;
  return ToolFormat::generic;
}

ReplySyntax reply_syntax(std::string_view src, const nlohmann::ordered_json& tools, std::string_view prompt,
                         ReasoningFormat reasoning) {
  ReplySyntax s;
  s.format = detect_tool_format(src, tools);
  s.reasoning = reasoning;
  const std::string_view open = "<think>\n";
  s.thinking_forced_open = (s.format == ToolFormat::hermes || s.format == ToolFormat::deepseek_r1) &&
                           prompt.size() >= open.size() && prompt.substr(prompt.size() - open.size()) == open;
  return s;
}

std::string random_tool_call_id() {
  static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(chars) - 2);
  std::string id(32, 'x');
  for (char& c : id) c = chars[pick(rng)];
  return id;
}

nlohmann::ordered_json ParsedReply::to_openai() const {
  nlohmann::ordered_json m;
  m["role"] = "assistant";
  m["content"] = content.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(content);
  if (!reasoning_content.empty()) m["reasoning_content"] = reasoning_content;
  if (!tool_calls.empty()) {
    auto& calls = m["tool_calls"] = nlohmann::ordered_json::array();
    for (const auto& c : tool_calls) {
      calls.push_back({{"type", "function"},
                       {"id", c.id.empty() ? random_tool_call_id() : c.id},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
  }
  return m;
}

namespace {

struct NeedMore {};   // partial input: what was produced so far is final-consistent; stop
struct Malformed {};  // the tool-call syntax is broken: fall back to content

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string strip(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

// s is a proper prefix of lit (more input could complete it)
bool proper_prefix(std::string_view s, std::string_view lit) {
  return s.size() < lit.size() && lit.substr(0, s.size()) == s;
}

enum class Json { complete, incomplete, invalid };

// End of the JSON value starting at p (after whitespace); a structural scan, validated afterwards.
Json scan_json(std::string_view s, size_t p, size_t& end) {
  if (p >= s.size()) return Json::incomplete;
  const char c = s[p];
  if (c == '{' || c == '[') {
    std::vector<char> stack;
    bool in_str = false, esc = false;
    for (size_t i = p; i < s.size(); ++i) {
      const char x = s[i];
      if (in_str) {
        if (esc)
          esc = false;
        else if (x == '\\')
          esc = true;
        else if (x == '"')
          in_str = false;
        continue;
      }
      if (x == '"') {
        in_str = true;
      } else if (x == '{' || x == '[') {
        if (stack.size() > 512) return Json::invalid;
        stack.push_back(x == '{' ? '}' : ']');
      } else if (x == '}' || x == ']') {
        if (stack.empty() || stack.back() != x) return Json::invalid;
        stack.pop_back();
        if (stack.empty()) {
          end = i + 1;
          return Json::complete;
        }
      }
    }
    return Json::incomplete;
  }
  if (c == '"') {
    bool esc = false;
    for (size_t i = p + 1; i < s.size(); ++i) {
      if (esc)
        esc = false;
      else if (s[i] == '\\')
        esc = true;
      else if (s[i] == '"') {
        end = i + 1;
        return Json::complete;
      }
    }
    return Json::incomplete;
  }
  if (c == '-' || std::isalnum(static_cast<unsigned char>(c))) {
    size_t i = p;
    while (i < s.size() &&
           (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '-' || s[i] == '+' || s[i] == '.'))
      ++i;
    if (i == s.size()) return Json::incomplete;
    end = i;
    return Json::complete;
  }
  return Json::invalid;
}

}  // namespace

// Scan results more input cannot change, kept by ReplyStream between partial parses so a push
// costs about the new text, not the whole reply: (search site, start offset) → no match starts
// before this offset.
struct ScanMemo {
  std::map<std::pair<const void*, size_t>, size_t> clear;
  size_t get(const void* site, size_t start) const {
    auto it = clear.find({site, start});
    return it == clear.end() ? start : std::max(start, it->second);
  }
  void put(const void* site, size_t start, size_t upto) { clear[{site, start}] = upto; }
};

namespace {

class Builder {
 public:
  Builder(std::string_view in, const ReplySyntax& syn, bool partial, ScanMemo* memo = nullptr)
      : in_(in), syn_(syn), partial_(partial), memo_(memo) {}

  // in_.find(lit, pos_), resuming where an earlier partial parse stopped.
  size_t find_from(std::string_view lit) {
    const size_t from = memo_ ? memo_->get(lit.data(), pos_) : pos_;
    const size_t at = in_.find(lit, from);
    if (at == std::string_view::npos && memo_)
      memo_->put(lit.data(), pos_, in_.size() >= lit.size() ? std::max(pos_, in_.size() - lit.size() + 1) : pos_);
    return at;
  }

  std::string_view in_;
  const ReplySyntax& syn_;
  bool partial_;
  ScanMemo* memo_;
  size_t pos_ = 0;
  ParsedReply r;

  std::string_view rest() const { return in_.substr(pos_); }
  bool starts(std::string_view lit) const { return rest().substr(0, lit.size()) == lit; }
  void consume_spaces() {
    while (pos_ < in_.size() && is_space(in_[pos_])) ++pos_;
  }
  [[noreturn]] void incomplete() const {
    if (partial_) throw NeedMore{};
    throw Malformed{};
  }

  // The literal at pos: consumed (true), absent (false), or a prefix of it ends the input (partial).
  bool try_literal(std::string_view lit) {
    if (starts(lit)) {
      pos_ += lit.size();
      return true;
    }
    if (partial_ && proper_prefix(rest(), lit)) throw NeedMore{};
    return false;
  }
  void expect_literal(std::string_view lit) {
    if (lit.empty()) return;
    if (!try_literal(lit)) incomplete();
  }

  // Searches lit from pos: text before it becomes content. Partial input that ends with a prefix
  // of lit stops (NeedMore) without adding anything.
  bool find_literal(std::string_view lit) {
    const size_t at = find_from(lit);
    if (at != std::string_view::npos) {
      r.content += in_.substr(pos_, at - pos_);
      pos_ = at + lit.size();
      return true;
    }
    if (partial_) {
      for (size_t k = std::max(pos_, in_.size() >= lit.size() ? in_.size() - lit.size() + 1 : 0); k < in_.size(); ++k) {
        if (proper_prefix(in_.substr(k), lit)) throw NeedMore{};
      }
    }
    return false;
  }

  // The rest is content; partial input holds back a suffix that may start one of `markers`.
  void rest_content(std::initializer_list<std::string_view> markers = {}) {
    std::string_view t = rest();
    if (partial_) {
      size_t cut = t.size(), longest = 0;
      for (auto m : markers) longest = std::max(longest, m.size());
      for (size_t k = t.size() > longest ? t.size() - longest : 0; k < t.size() && cut == t.size(); ++k) {
        for (auto m : markers) {
          if (proper_prefix(t.substr(k), m)) {
            cut = k;
            break;
          }
        }
      }
      r.content += t.substr(0, cut);
      pos_ += cut;
      if (cut < t.size()) throw NeedMore{};
      return;
    }
    r.content += t;
    pos_ = in_.size();
  }

  nlohmann::ordered_json consume_json() {
    consume_spaces();
    size_t end = 0;
    const Json j = scan_json(in_, pos_, end);
    if (j == Json::incomplete) incomplete();
    if (j == Json::invalid) {
      if (partial_) throw NeedMore{};
      throw Malformed{};
    }
    auto v = nlohmann::ordered_json::parse(in_.substr(pos_, end - pos_), nullptr, false);
    if (v.is_discarded()) {
      if (partial_) throw NeedMore{};
      throw Malformed{};
    }
    pos_ = end;
    consume_spaces();
    return v;
  }

  void add_call(std::string name, const nlohmann::ordered_json& args, std::string id = {}) {
    if (name.empty()) throw Malformed{};
    r.tool_calls.push_back(
        ToolCall{std::move(id), std::move(name), args.is_string() ? args.get<std::string>() : args.dump()});
  }
  void add_call(const nlohmann::ordered_json& call) {
    if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) throw Malformed{};
    std::string id = call.contains("id") && call["id"].is_string() ? call["id"].get<std::string>() : "";
    add_call(call["name"].get<std::string>(),
             call.contains("arguments") ? call["arguments"] : nlohmann::ordered_json::object(), std::move(id));
  }
  void add_calls(const nlohmann::ordered_json& calls) {
    if (!calls.is_array()) throw Malformed{};
    for (const auto& c : calls) add_call(c);
  }

  // llama.cpp's try_parse_reasoning("<think>", "</think>").
  void reasoning() {
    if (syn_.reasoning == ReasoningFormat::none) return;
    const std::string_view open = "<think>", close = "</think>";
    if (!syn_.thinking_forced_open && !try_literal(open)) return;
    const size_t at = find_from(close);
    if (at != std::string_view::npos) {
      r.reasoning_content += strip(in_.substr(pos_, at - pos_));
      pos_ = at + close.size();
      consume_spaces();
      return;
    }
    if (partial_) {
      std::string_view t = rest();
      for (size_t k = t.size() >= close.size() ? t.size() - close.size() + 1 : 0; k < t.size(); ++k) {
        if (proper_prefix(t.substr(k), close)) {
          t = t.substr(0, k);
          break;
        }
      }
      r.reasoning_content += strip(t);
      throw NeedMore{};
    }
    r.reasoning_content += strip(rest());
    pos_ = in_.size();
  }
};

// ---- hermes: llama.cpp's open_regex, matched by hand ----
enum class Match { no, yes, more };
struct HermesOpen {
  size_t begin = 0, json_at = 0, end = 0;
  bool block = false;
  std::string tag, function;  // function: <function=NAME> / <function name="NAME"> forms
};

Match hermes_at(std::string_view s, size_t i, HermesOpen& m) {
  auto need = [&](size_t j, std::string_view lit) -> Match {  // lit at j?
    if (s.substr(j, lit.size()) == lit) return Match::yes;
    return proper_prefix(s.substr(j), lit) ? Match::more : Match::no;
  };
  bool more = false;
  // alternative 1: (```(xml|json)?\n\s*)? (<tag>)? \s*\{\s*"name"
  for (int with_block = 1; with_block >= 0; --with_block) {
    size_t j = i;
    if (with_block) {
      const Match b = need(j, "```");
      if (b == Match::more) more = true;
      if (b != Match::yes) continue;
      j += 3;
      if (s.substr(j, 3) == "xml")
        j += 3;
      else if (s.substr(j, 4) == "json")
        j += 4;
      else if (proper_prefix(s.substr(j), "json") || proper_prefix(s.substr(j), "xml"))
        more = true;
      if (j >= s.size()) {
        more = true;
        continue;
      }
      if (s[j] != '\n') continue;
      ++j;
      while (j < s.size() && is_space(s[j])) ++j;
    }
    static const char* tags[] = {"<tool_call>", "<function_call>", "<tools>", "<tool>",
                                 "<response>",  "<json>",          "<xml>",   "<JSON>"};
    for (int with_tag = 1; with_tag >= 0; --with_tag) {
      size_t k = j;
      std::string tag;
      if (with_tag) {
        for (const char* t : tags) {
          const Match tm = need(k, t);
          if (tm == Match::more) more = true;
          if (tm == Match::yes) {
            tag = t;
            k += tag.size();
            break;
          }
        }
        if (tag.empty()) continue;
      }
      const size_t json_at = k;
      while (k < s.size() && is_space(s[k])) ++k;
      if (k >= s.size()) {
        more = true;
        continue;
      }
      if (s[k] != '{') continue;
      ++k;
      while (k < s.size() && is_space(s[k])) ++k;
      const Match nm = need(k, "\"name\"");
      if (nm == Match::more) more = true;
      if (nm != Match::yes) continue;
      m = HermesOpen{i, json_at, k + 6, with_block == 1, tag, {}};
      return Match::yes;
    }
  }
  // alternatives 2 and 3: <function=NAME> and <function name="NAME">
  for (std::string_view pre : {std::string_view("<function="), std::string_view("<function name=\"")}) {
    const Match p = need(i, pre);
    if (p == Match::more) more = true;
    if (p != Match::yes) continue;
    const char close = pre.back() == '"' ? '"' : '>';
    size_t j = i + pre.size();
    const size_t name_at = j;
    while (j < s.size() && s[j] != close) ++j;
    if (j >= s.size()) {
      more = true;
      continue;
    }
    if (j == name_at) continue;
    std::string name(s.substr(name_at, j - name_at));
    ++j;
    if (close == '"') {
      const Match g = need(j, ">");
      if (g == Match::more) more = true;
      if (g != Match::yes) continue;
      ++j;
    }
    m = HermesOpen{i, j, j, false, {}, name};
    return Match::yes;
  }
  return more ? Match::more : Match::no;
}

void parse_hermes(Builder& b) {
  b.reasoning();
  if (!b.syn_.parse_tool_calls) return b.rest_content();
  while (true) {
    HermesOpen m;
    Match found = Match::no;
    static const char site = 0;
    const size_t start = b.pos_;
    size_t i = b.memo_ ? b.memo_->get(&site, start) : start;
    for (; i < b.in_.size(); ++i) {
      found = hermes_at(b.in_, i, m);
      if (found == Match::yes) break;
      if (found == Match::more && b.partial_) break;
    }
    if (b.memo_) b.memo_->put(&site, start, i);  // every position before i is a definite "no"

    if (found == Match::more && b.partial_) {
      b.r.content += b.in_.substr(b.pos_, i - b.pos_);
      throw NeedMore{};
    }
    if (found != Match::yes) break;
    b.r.content += b.in_.substr(b.pos_, m.begin - b.pos_);
    const std::string block_end = m.block ? "```" : "";
    if (m.function.empty()) {
      b.pos_ = m.json_at;
      const std::string close = m.tag.empty() ? "" : "</" + m.tag.substr(1);
      b.add_call(b.consume_json());
      b.consume_spaces();
      b.expect_literal(close);
    } else {
      b.pos_ = m.json_at;
      b.add_call(m.function, b.consume_json());
      b.consume_spaces();
      b.expect_literal("</function>");
    }
    b.consume_spaces();
    if (!block_end.empty()) {
      b.expect_literal(block_end);
      b.consume_spaces();
    }
  }
  b.rest_content();
}

// ---- llama 3.x ----
bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// \s*\{\s*(?:"type"\s*:\s*"function"\s*,\s*)?"name"\s*:\s*"([^"]+)"\s*,\s*"parameters"\s*:<space>
// anchored at p; `typed` picks the branch of the optional group.
Match llama3_path(std::string_view s, size_t p, bool typed, std::string& name, size_t& end) {
  size_t i = p;
  auto ws = [&] {
    while (i < s.size() && is_space(s[i])) ++i;
  };
  auto lit = [&](std::string_view l) -> Match {
    if (s.substr(i, l.size()) == l) {
      i += l.size();
      return Match::yes;
    }
    return proper_prefix(s.substr(i), l) ? Match::more : Match::no;
  };
#define ROCKY_STEP(x) \
  if (Match m_ = (x); m_ != Match::yes) return m_
  ws();
  ROCKY_STEP(lit("{"));
  ws();
  if (typed) {
    ROCKY_STEP(lit("\"type\""));
    ws();
    ROCKY_STEP(lit(":"));
    ws();
    ROCKY_STEP(lit("\"function\""));
    ws();
    ROCKY_STEP(lit(","));
    ws();
  }
  ROCKY_STEP(lit("\"name\""));
  ws();
  ROCKY_STEP(lit(":"));
  ws();
  ROCKY_STEP(lit("\""));
  const size_t name_at = i;
  while (i < s.size() && s[i] != '"') ++i;
  if (i >= s.size()) return Match::more;
  if (i == name_at) return Match::no;
  name = std::string(s.substr(name_at, i - name_at));
  ++i;
  ws();
  ROCKY_STEP(lit(","));
  ws();
  ROCKY_STEP(lit("\"parameters\""));
  ws();
  ROCKY_STEP(lit(":"));
  ROCKY_STEP(lit(" "));
#undef ROCKY_STEP
  end = i;
  return Match::yes;
}

Match llama3_head(std::string_view s, size_t p, std::string& name, size_t& end) {
  const Match typed = llama3_path(s, p, true, name, end);
  if (typed == Match::yes) return typed;
  const Match plain = llama3_path(s, p, false, name, end);
  if (plain == Match::yes) return plain;
  return typed == Match::more || plain == Match::more ? Match::more : Match::no;
}

void parse_llama3(Builder& b, bool builtin) {
  b.reasoning();
  if (!b.syn_.parse_tool_calls) return b.rest_content();
  if (builtin && b.find_literal("<|python_tag|>")) {
    // \s*(\w+)\s*\.\s*call\(  then  \s*(\w+)\s*=\s* JSON, ...  then )
    auto ws = [&] { b.consume_spaces(); };
    ws();
    const size_t n0 = b.pos_;
    while (b.pos_ < b.in_.size() && is_word(b.in_[b.pos_])) ++b.pos_;
    if (b.pos_ == n0) b.incomplete();
    std::string fname(b.in_.substr(n0, b.pos_ - n0));
    ws();
    b.expect_literal(".");
    ws();
    b.expect_literal("call(");
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    while (true) {
      ws();
      const size_t a0 = b.pos_;
      while (b.pos_ < b.in_.size() && is_word(b.in_[b.pos_])) ++b.pos_;
      if (b.pos_ == a0) break;
      std::string aname(b.in_.substr(a0, b.pos_ - a0));
      ws();
      if (!b.try_literal("=")) {
        b.pos_ = a0;
        break;
      }
      args[aname] = b.consume_json();
      if (!b.try_literal(",")) break;
    }
    b.expect_literal(")");
    b.consume_spaces();
    b.add_call(fname, args);
    return b.rest_content();
  }
  std::string name;
  size_t end = 0;
  const Match m = llama3_head(b.in_, b.pos_, name, end);
  if (m == Match::more && b.partial_) throw NeedMore{};
  if (m == Match::yes) {
    b.pos_ = end;
    b.add_call(name, b.consume_json());
    b.expect_literal("}");
    b.consume_spaces();
  }
  b.rest_content(builtin ? std::initializer_list<std::string_view>{"<|python_tag|>"}
                         : std::initializer_list<std::string_view>{});
}

// ---- mistral nemo ----
void parse_mistral(Builder& b) {
  if (!b.syn_.parse_tool_calls) return b.rest_content();
  if (b.find_literal("[TOOL_CALLS]")) {
    b.add_calls(b.consume_json());
    return b.rest_content();
  }
  b.rest_content({"[TOOL_CALLS]"});
}

// ---- granite ----
void parse_granite(Builder& b) {
  b.reasoning();
  if (b.try_literal("<response>")) {
    if (!b.find_literal("</response>") && b.partial_) {
      // stream the response text, holding back a possible closing tag or tool-call marker
      b.rest_content({"</response>", "<|tool_call|>"});
      return;
    }
  }
  if (!b.syn_.parse_tool_calls) return b.rest_content();
  if (b.find_literal("<|tool_call|>")) {
    b.add_calls(b.consume_json());
    return b.rest_content();
  }
  b.rest_content({"<|tool_call|>"});
}

// ---- deepseek r1 ----
void parse_r1(Builder& b) {
  b.reasoning();
  if (!b.syn_.parse_tool_calls) return b.rest_content();
  static const std::string_view opens[] = {"<｜tool▁calls▁begin｜>", "<｜tool_calls_begin｜>", "<｜tool calls begin｜>",
                                           "<｜tool\\_calls\\_begin｜>", "<｜tool▁calls｜>"};
  size_t best = std::string_view::npos, best_len = 0;
  for (auto o : opens) {
    const size_t at = b.in_.find(o, b.pos_);
    if (at < best) {
      best = at;
      best_len = o.size();
    }
  }
  if (best == std::string_view::npos) {
    return b.rest_content({opens[0], opens[1], opens[2], opens[3], opens[4]});
  }
  b.r.content += b.in_.substr(b.pos_, best - b.pos_);
  b.pos_ = best + best_len;
  const std::string_view call_begin = "<｜tool▁call▁begin｜>", fn = "function<｜tool▁sep｜>";
  const std::string_view call_end = "<｜tool▁call▁end｜>", calls_end = "<｜tool▁calls▁end｜>";
  while (true) {
    // (?:<｜tool▁call▁begin｜>)?function<｜tool▁sep｜>([^\n]+)\n```json\n
    const size_t f = b.find_from(fn);
    if (f == std::string_view::npos) {
      if (b.partial_) {
        const std::string_view t = b.rest();
        const size_t longest = call_begin.size() + fn.size();
        for (size_t k = t.size() > longest ? t.size() - longest : 0; k < t.size(); ++k) {
          if (proper_prefix(t.substr(k), call_begin) || proper_prefix(t.substr(k), fn) ||
              (t.substr(k, call_begin.size()) == call_begin && proper_prefix(t.substr(k + call_begin.size()), fn))) {
            b.r.content += t.substr(0, k);
            throw NeedMore{};
          }
        }
      }
      break;
    }
    size_t begin = f;
    if (f >= b.pos_ + call_begin.size() && b.in_.substr(f - call_begin.size(), call_begin.size()) == call_begin)
      begin = f - call_begin.size();
    size_t i = f + fn.size();
    const size_t name_at = i;
    while (i < b.in_.size() && b.in_[i] != '\n') ++i;
    if (i >= b.in_.size()) {
      b.r.content += b.in_.substr(b.pos_, begin - b.pos_);
      b.incomplete();
    }
    const std::string name(b.in_.substr(name_at, i - name_at));
    const std::string_view fence = "\n```json\n";
    if (b.in_.substr(i, fence.size()) != fence) {
      if (b.partial_ && proper_prefix(b.in_.substr(i), fence)) {
        b.r.content += b.in_.substr(b.pos_, begin - b.pos_);
        throw NeedMore{};
      }
      throw Malformed{};
    }
    if (name.empty()) throw Malformed{};
    b.r.content += b.in_.substr(b.pos_, begin - b.pos_);
    b.pos_ = i + fence.size();
    b.add_call(name, b.consume_json());
    // ```[\s\r\n]*<｜tool▁call▁end｜>
    b.expect_literal("```");
    b.consume_spaces();
    b.expect_literal(call_end);
  }
  // the closing marker; a reply that stops right after the last call is accepted too
  if (b.pos_ < b.in_.size()) b.expect_literal(calls_end);
  b.consume_spaces();
  b.rest_content();
}

// ---- generic ----
void parse_generic(Builder& b) {
  if (!b.syn_.parse_tool_calls) return b.rest_content();
  size_t p = b.pos_;
  while (p < b.in_.size() && is_space(b.in_[p])) ++p;
  if (b.partial_ && p >= b.in_.size()) throw NeedMore{};
  if (p < b.in_.size() && b.in_[p] != '{') throw Malformed{};
  const auto v = b.consume_json();
  if (!v.is_object()) throw Malformed{};
  if (v.contains("tool_calls")) {
    b.add_calls(v["tool_calls"]);
  } else if (v.contains("tool_call")) {
    b.add_call(v["tool_call"]);
  } else if (v.contains("response")) {
    const auto& resp = v["response"];
    b.r.content += resp.is_string() ? resp.get<std::string>() : resp.dump(2);
  } else {
    throw Malformed{};
  }
  b.rest_content();
}

void parse_with(Builder& b) {
  switch (b.syn_.format) {
    case ToolFormat::content_only:
      b.reasoning();
      b.rest_content();
      return;
    case ToolFormat::generic: return parse_generic(b);
    case ToolFormat::hermes: return parse_hermes(b);
    case ToolFormat::llama3: return parse_llama3(b, false);
    case ToolFormat::llama3_builtin: return parse_llama3(b, true);
    case ToolFormat::mistral_nemo: return parse_mistral(b);
    case ToolFormat::deepseek_r1: return parse_r1(b);
    case ToolFormat::granite: return parse_granite(b);
  }
}

// partial = true: stop where the text may still change meaning; the result is a prefix of the
// final one. `fell_back` reports a final parse that had to treat the reply as plain content.
ParsedReply parse_impl(std::string_view text, const ReplySyntax& syn, bool partial, ScanMemo* memo = nullptr) {
  {
    Builder b(text, syn, partial, partial ? memo : nullptr);
    try {
      parse_with(b);
      return std::move(b.r);
    } catch (const NeedMore&) {
      return std::move(b.r);
    } catch (const Malformed&) {
      if (partial) return std::move(b.r);
    }
  }
  ReplySyntax content = syn;
  content.format = ToolFormat::content_only;
  Builder b(text, content, false);
  try {
    parse_with(b);
  } catch (const NeedMore&) {
  } catch (const Malformed&) {}
  b.r.malformed = true;
  return std::move(b.r);
}

}  // namespace

ParsedReply parse_reply(std::string_view text, const ReplySyntax& syntax) { return parse_impl(text, syntax, false); }

namespace {

// Length of s without an incomplete UTF-8 sequence at its end (a split character waits).
size_t utf8_safe_len(const std::string& s) {
  size_t n = s.size();
  size_t k = 0;
  while (k < 4 && k < n && (static_cast<unsigned char>(s[n - 1 - k]) & 0xC0) == 0x80) ++k;
  if (k < n) {
    const auto lead = static_cast<unsigned char>(s[n - 1 - k]);
    const size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (want > k + 1 && want <= 4) return n - 1 - k;
  }
  return n;
}

// Appends the new part of `now` beyond `sent` to `out` (only when `now` extends `sent`).
void extend(const std::string& now, std::string& sent, std::string& out, bool final_flush) {
  if (now.size() <= sent.size() || now.compare(0, sent.size(), sent) != 0) return;
  const size_t upto = final_flush ? now.size() : std::max(sent.size(), utf8_safe_len(now));
  out = now.substr(sent.size(), upto - sent.size());
  sent = now.substr(0, upto);
}

}  // namespace

ReplyStream::Delta ReplyStream::diff(const ParsedReply& now) {
  Delta d;
  extend(now.content, sent_content_, d.content, finished_);
  extend(now.reasoning_content, sent_reasoning_, d.reasoning_content, finished_);
  for (size_t k = sent_calls_; k < now.tool_calls.size(); ++k) d.tool_calls.push_back(now.tool_calls[k]);
  sent_calls_ = std::max(sent_calls_, now.tool_calls.size());
  return d;
}

ReplyStream::ReplyStream(ReplySyntax syntax) : syntax_(syntax), memo_(std::make_unique<ScanMemo>()) {}
ReplyStream::~ReplyStream() = default;
ReplyStream::ReplyStream(ReplyStream&&) noexcept = default;
ReplyStream& ReplyStream::operator=(ReplyStream&&) noexcept = default;

ReplyStream::Delta ReplyStream::push(std::string_view text) {
  if (finished_) fail("ReplyStream: push after finish");
  text_ += text;
  return diff(parse_impl(text_, syntax_, true, memo_.get()));
}

ReplyStream::Delta ReplyStream::finish() {
  if (finished_) return {};
  finished_ = true;
  ParsedReply fin = parse_impl(text_, syntax_, false);
  const bool consistent = fin.content.compare(0, sent_content_.size(), sent_content_) == 0 &&
                          fin.reasoning_content.compare(0, sent_reasoning_.size(), sent_reasoning_) == 0 &&
                          fin.tool_calls.size() >= sent_calls_;
  if (!consistent) {
    // The end of the reply broke a call after earlier ones were sent (the final parse fell back
    // to plain content): keep what was sent; the broken tail is dropped.
    fin = parse_impl(text_, syntax_, true, memo_.get());
  }
  Delta d = diff(fin);
  done_ = ParsedReply{sent_content_, sent_reasoning_, fin.tool_calls, fin.malformed || !consistent};
  return d;
}

}  // namespace rocky::chat
