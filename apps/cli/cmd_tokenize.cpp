// rocky tokenize -m MODEL -p TEXT [--ids] [--no-bos] [--no-parse-special]
// Prints the token ids of TEXT as llama-tokenize does: with --ids one line "[id, id, …]", otherwise
// one "id -> 'piece'" line per token.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::cli {
namespace {

struct TokenizeOpts {
  std::string model;
  std::string prompt;
  bool ids = false;
  bool no_bos = false;
  bool no_parse_special = false;
};

int run_tokenize(const TokenizeOpts& o) {
  const auto tok = tok::Tokenizer::load(o.model);
  const auto ids = tok.tokenize(o.prompt, !o.no_bos, !o.no_parse_special);
  if (o.ids) {
    fmt::print("[{}]\n", fmt::join(ids, ", "));
    return 0;
  }
  for (auto id : ids) fmt::print("{:6} -> '{}'\n", id, tok.token_to_piece(id));
  return 0;
}

}  // namespace

void add_tokenize(CLI::App& app, Runner& run) {
  auto o = std::make_shared<TokenizeOpts>();
  auto* sub = app.add_subcommand("tokenize", "Tokenize text with a GGUF model's tokenizer (as llama-tokenize)");
  sub->add_option("-m,--model", o->model, "GGUF file")->required();
  sub->add_option("-p,--prompt", o->prompt, "Text to tokenize")->required();
  sub->add_flag("--ids", o->ids, "Print only the ids, as [id, id, ...]");
  sub->add_flag("--no-bos", o->no_bos, "Do not add BOS/EOS even when the model asks for them");
  sub->add_flag("--no-parse-special", o->no_parse_special, "Do not match control tokens in the text");
  sub->callback([&run, o] { run = [o] { return run_tokenize(*o); }; });
}

}  // namespace rocky::cli
