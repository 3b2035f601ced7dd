// rocky run -m MODEL (-p TEXT | -f FILE) -n N [--device cpu|vulkan[:N]|auto] [--matmul auto|mmq|mm|basic]
//           [-c N] [-ub N] [--temp T] [--seed S]
//           [--json] [--dump-logits FILE] [--dump-all-logits FILE]
// Tokenizes the prompt (BOS as the model's metadata says), prefills it in ubatches of -ub tokens,
// then generates up to N tokens one at a time (stops at end-of-generation unless --ignore-eos),
// streaming the text to stdout; timings go to stderr. --json prints one object instead.
// --dump-logits: the last prompt position's logits, little-endian f32 [n_vocab];
// --dump-all-logits: every prompt position, row-major [n_prompt][n_vocab] (the reference layout).
// -cnv/--chat [-sys TEXT] [--chat-template-file FILE] [-st]: a conversation through the chat
// template (see run_chat).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "core/error.hpp"
#include "grammar/constraint.hpp"
#include "model/model.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/generator.hpp"
#include "runtime/prefix_cache.hpp"
#include "runtime/sampler.hpp"
#include "runtime/session.hpp"
#include "runtime/speculative.hpp"
#include "server/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::cli {
namespace {

struct RunOpts {
  std::string model, prompt, prompt_file, device = "auto", dump_logits, dump_all_logits, matmul = "auto";
  int32_t n_predict = 32;
  int32_t n_ctx = 0;
  int32_t n_ubatch = 512;
  bool swa_full = false;  // --swa-full
  bool json = false;
  bool ignore_eos = false;
  bool chat = false;         // -cnv: a conversation through the chat template
  bool single_turn = false;  // -st: one turn (-p/-f, else the first stdin line)
  std::string system, chat_template_file, chat_template;
  runtime::SamplerParams sp;
  // Prefix cache (runtime/prefix_cache.hpp): with --cache-dir, a prompt whose leading blocks an
  // earlier run computed loads them from disk instead of recomputing them.
  std::string cache_dir;
  int32_t cache_block = 256;
  uint64_t cache_disk_mib = 8192;
  KvCacheFlags kv;  // -ctk/-ctv (default f16 on the GPU)
  // Structured output (llama.cpp's flags): at most one of these.
  std::string grammar, grammar_file, json_schema, json_schema_file;
  // Speculative decoding (runtime/speculative.hpp; llama.cpp's flag names).
  std::string spec_type = "none";  // none | ngram-simple | lab-alpha (-md MODEL: a draft model)
  std::string draft_model;
  int32_t draft_max = 16, draft_min = 0;
  float draft_p_min = 0.75f;
  int32_t ngram_n = 3, ngram_m = 48;
  double lab_alpha = 0.8;
};

// The drafter the flags ask for, with what it owns (a draft model and its session).
struct Speculation {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<runtime::Session> session;
  std::unique_ptr<runtime::Drafter> drafter;
};

bool speculating(const RunOpts& o) { return o.spec_type != "none" || !o.draft_model.empty(); }

// Checks the flags against the target; the lab drafter is made later (it needs the target's output).
Speculation make_speculation(const RunOpts& o, runtime::Session& target, const tok::Tokenizer& tok,
                             const runtime::SamplerParams& sp) {
  Speculation s;
  if (!speculating(o)) return s;
  if (!o.draft_model.empty() && o.spec_type != "none") fail("-md and --spec-type {} both draft; give one", o.spec_type);
  if (target.recurrent())
    fail(
        "{}: speculative decoding is off for this model: its recurrent (linear-attention) layers keep a state that "
        "cannot be rolled back past rejected drafts; run without --spec-type/-md",
        o.model);
  if (o.draft_min > o.draft_max) fail("--draft-min {} is above --draft-max {}", o.draft_min, o.draft_max);
  if (o.spec_type == "ngram-simple") {
    s.drafter = std::make_unique<runtime::NgramDrafter>(o.ngram_n, o.ngram_m);
  } else if (!o.draft_model.empty()) {
    s.model = model::Model::load(o.draft_model);
    auto dtok = tok::Tokenizer::from_gguf(s.model->file());
    runtime::check_draft_vocab(tok.vocab(), dtok.vocab(), o.model, o.draft_model);
    // Its own context of the target's size, on the target's backend (weights are per model).
    s.session = std::make_unique<runtime::Session>(
        *s.model, target.shared_backend(), runtime::SessionOptions{target.n_ctx(), o.n_ubatch, true, o.swa_full});
    const int32_t nv = static_cast<int32_t>(std::min(tok.vocab().size(), dtok.vocab().size()));
    s.drafter = std::make_unique<runtime::ModelDrafter>(*s.session, sp, nv, o.draft_p_min);
  }
  return s;
}

void set_speculation(const RunOpts& o, runtime::GenerateParams& gp, runtime::Drafter* d) {
  gp.drafter = d;
  gp.draft_max = o.draft_max;
  gp.draft_min = o.draft_min;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("{}: cannot read", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The output constraint the flags ask for (null: none), compiled against the vocabulary. Errors
// name the flag and the place (line:col or JSON pointer).
std::shared_ptr<grammar::CompiledGrammar> make_constraint(const RunOpts& o, const tok::Tokenizer& tok) {
  std::vector<std::string> given;
  if (!o.grammar.empty()) given.push_back("--grammar");
  if (!o.grammar_file.empty()) given.push_back("--grammar-file");
  if (!o.json_schema.empty()) given.push_back("--json-schema");
  if (!o.json_schema_file.empty()) given.push_back("--json-schema-file");
  if (given.empty()) return nullptr;
  if (given.size() > 1) fail("{} and {} both constrain the output; give one", given[0], given[1]);
  try {
    if (!o.grammar.empty()) return grammar::compile_gbnf(o.grammar, tok);
    if (!o.grammar_file.empty()) return grammar::compile_gbnf(read_all(o.grammar_file), tok);
    const std::string text = o.json_schema.empty() ? read_all(o.json_schema_file) : o.json_schema;
    nlohmann::json schema;
    try {
      schema = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail("not JSON: {}", e.what());
    }
    return grammar::compile_json_schema(schema, tok);
  } catch (const Error& e) {
    const std::string where = !o.grammar_file.empty()       ? o.grammar_file
                              : !o.json_schema_file.empty() ? o.json_schema_file
                                                            : given[0];
    throw Error(fmt::format("{}: {}", where, e.what()));
  }
}

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

void write_f32(const std::string& path, const float* data, size_t n) {
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("cannot open '{}' for writing", path);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(float)));
  if (!f) fail("cannot write {} bytes to '{}'", n * sizeof(float), path);
}

std::string read_text(const std::string& path) {
  // A directory opens as an ifstream and reads as empty: without this check `-f DIR` would run
  // the empty prompt.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("cannot read prompt file '{}': it is a directory", path);
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot read prompt file '{}'", path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

int run_run(const RunOpts& o) {
  if (o.n_predict < -1) fail("-n must be ≥ -1 (got {})", o.n_predict);
  const std::string prompt = o.prompt_file.empty() ? o.prompt : read_text(o.prompt_file);
  auto t_load = Clock::now();
  auto model = model::Model::load(o.model);
  auto tok = tok::Tokenizer::from_gguf(model->file());
  // Embedding tables may be padded past the vocab; a vocab larger than the table is an error.
  if (tok.vocab().size() > static_cast<size_t>(model->hparams().n_vocab)) {
    fail("{}: the vocab has {} tokens but token_embd.weight has only {} rows", o.model, tok.vocab().size(),
         model->hparams().n_vocab);
  }
  // A padded table is legal (alignment rows): its extra logits are masked in the sampler.
  runtime::SamplerParams sp = o.sp;
  sp.n_vocab = static_cast<int32_t>(tok.vocab().size());
  if (sp.n_vocab < model->hparams().n_vocab) {
    fmt::print(stderr,
               "rocky: {}: token_embd.weight has {} rows, the vocabulary {} tokens; ids ≥ {} are never sampled\n",
               o.model, model->hparams().n_vocab, sp.n_vocab, sp.n_vocab);
  }
  std::vector<int32_t> ids = tok.tokenize(prompt, /*add_special=*/true, /*parse_special=*/true);
  if (ids.empty()) fail("the prompt is empty (no tokens to evaluate)");
  runtime::BackendOptions bo;
  bo.device = o.device;
  bo.matmul = o.matmul;
  bo.kv_f16 = kv_cache_f16(o.kv);
  bo.env = process_env();
  runtime::Session session(*model, runtime::make_backend(bo),
                           runtime::SessionOptions{o.n_ctx, o.n_ubatch, true, o.swa_full});
  if (static_cast<int64_t>(ids.size()) > session.n_ctx()) {
    fail("the prompt has {} tokens, more than the context size {} (raise -c)", ids.size(), session.n_ctx());
  }
  const double load_ms = ms_since(t_load);
  std::unique_ptr<runtime::PrefixCache> cache;
  runtime::PrefixHit hit;
  if (!o.cache_dir.empty()) {
    runtime::PrefixCacheOptions co;
    co.block = o.cache_block;
    co.dir = o.cache_dir;
    co.disk_bytes = o.cache_disk_mib << 20;
    co.ram_bytes = std::max<uint64_t>(co.disk_bytes, 64ull << 20);  // one run: RAM only stages disk writes
    cache = std::make_unique<runtime::PrefixCache>(runtime::cache_identity(*model, session.context()), co);
    // Every prompt position's logits need every position evaluated: nothing is reused then.
    hit = runtime::restore_prefix(session, cache.get(), {}, ids, o.dump_all_logits.empty());
    if (!o.json && hit.n_cached > 0)
      fmt::print(stderr, "rocky: prefix cache: {} of {} prompt tokens from {}\n", hit.n_cached, ids.size(),
                 o.cache_dir);
  }

  // Prefill, then generation (runtime::Generator: sampling, stop rules, UTF-8-safe stream).
  const bool show_progress = ids.size() > 256 && !o.json;
  runtime::ProgressFn progress;
  if (show_progress) {
    // At most four updates a second, plus the final one.
    progress = [last = Clock::time_point{}](int64_t done, int64_t total) mutable {
      if (done != total && Clock::now() - last < std::chrono::milliseconds(250)) return;
      last = Clock::now();
      fmt::print(stderr, "\rprompt: {}/{} tokens", done, total);
      if (done == total) fmt::print(stderr, "\n");
    };
  }
  const size_t nv = static_cast<size_t>(session.n_vocab());
  auto on_prompt_logits = [&](std::span<const float> logits) {
    if (!o.dump_all_logits.empty()) write_f32(o.dump_all_logits, logits.data(), logits.size());
    if (!o.dump_logits.empty()) write_f32(o.dump_logits, logits.data() + logits.size() - nv, nv);
    // Device memory = weights + KV + arena, known once the first ubatch has run.
    if (!o.json && session.backend().stats().kind != "cpu") {
      const backend::ContextStats cs = session.context().stats();
      fmt::print(stderr, "{}: device memory {}\n", session.backend().name(),
                 backend::memory_summary(session.backend().stats().memory.weights, cs.memory.kv, cs.memory.arena));
    }
    if (!o.json) fmt::print("{}", prompt);
    std::fflush(stdout);
  };
  std::string tail;
  auto on_token = [&](const runtime::TokenEvent& ev) {
    if (ev.token < 0)
      tail = std::string(ev.text);
    else if (!o.json) {
      fmt::print("{}", ev.text);
      std::fflush(stdout);
    }
    return true;
  };
  runtime::GenerateParams gp;
  gp.sampling = sp;
  gp.max_tokens = o.n_predict;
  gp.ignore_eos = o.ignore_eos;
  gp.all_logits = !o.dump_all_logits.empty();
  gp.n_cached = hit.n_cached;
  gp.grammar = make_constraint(o, tok);
  runtime::SessionSource src(session);
  runtime::Generator generator(src, tok);
  Speculation spec = make_speculation(o, session, tok, sp);
  if (o.spec_type == "lab-alpha") {
    // Measurement only: the target's own greedy continuation first (untimed, not shown), then the
    // timed run drafts it back with each token corrupted with probability 1 − alpha.
    runtime::GenerateParams oracle = gp;
    oracle.sampling.temp = 0;
    oracle.grammar = make_constraint(o, tok);
    oracle.all_logits = false;
    const runtime::GenerateResult ro = generator.generate(ids, oracle);
    session.reset();
    gp.n_cached = 0;
    if (!o.json)
      fmt::print(stderr, "rocky: lab drafter (measurement only): the target's greedy output, alpha {}\n", o.lab_alpha);
    spec.drafter = std::make_unique<runtime::LabDrafter>(ro.tokens, ids.size(), o.lab_alpha, sp.n_vocab,
                                                         sp.seed == runtime::k_default_seed ? 1u : sp.seed);
  }
  set_speculation(o, gp, spec.drafter.get());
  const runtime::GenerateResult r = generator.generate(ids, gp, on_token, progress, on_prompt_logits);
  if (cache) {
    std::vector<int32_t> held = ids;
    const size_t fed = r.reason == runtime::StopReason::Eog || r.tokens.empty() ? r.tokens.size() : r.tokens.size() - 1;
    held.insert(held.end(), r.tokens.begin(), r.tokens.begin() + static_cast<std::ptrdiff_t>(fed));
    if (static_cast<int32_t>(held.size()) == session.n_past()) runtime::save_prefix(session, *cache, held);
    cache->flush();
  }
  const std::vector<int32_t>& gen = r.tokens;
  const std::string& text = r.text;
  const bool ctx_full = r.reason == runtime::StopReason::ContextFull;
  const double prompt_ms = r.prompt_ms;
  const double gen_ms = r.gen_ms;
  // Generated tokens that were evaluated (the last sampled token is not fed back).
  const double n_gen_eval = gen.empty() ? 0.0 : static_cast<double>(gen.size());
  const double prompt_tps = static_cast<double>(ids.size() - static_cast<size_t>(r.n_cached)) / (prompt_ms / 1000.0);
  const double gen_tps = gen_ms > 0 ? n_gen_eval / (gen_ms / 1000.0) : 0.0;
  if (o.json) {
    nlohmann::json j;
    j["model"] = o.model;
    j["device"] = session.backend().name();
    j["seed"] = r.seed;
    j["prompt_ids"] = ids;
    j["generated_ids"] = gen;
    j["text"] = text;
    j["n_cached"] = r.n_cached;
    j["timings"] = {{"load_ms", load_ms},       {"prompt_ms", prompt_ms}, {"n_prompt", ids.size()},
                    {"prompt_tps", prompt_tps}, {"gen_ms", gen_ms},       {"n_gen", gen.size()},
                    {"gen_tps", gen_tps}};
    if (gp.drafter) {
      j["timings"]["draft_n"] = r.draft_n;
      j["timings"]["draft_n_accepted"] = r.draft_n_accepted;
    }
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{}\n", tail);
    std::fflush(stdout);  // the text before the timing line on stderr, also when both are piped
    if (ctx_full) fmt::print(stderr, "rocky: context full ({} tokens); stopped\n", session.n_ctx());
    fmt::print(stderr, "prompt: {} tokens in {:.1f} ms ({:.1f} t/s); generation: {} tokens in {:.1f} ms ({:.1f} t/s)\n",
               ids.size(), prompt_ms, prompt_tps, gen.size(), gen_ms, gen_tps);
    if (gp.drafter)
      fmt::print(stderr, "speculation ({}): {} drafted, {} accepted ({:.1f} %) in {} verify steps\n",
                 gp.drafter->name(), r.draft_n, r.draft_n_accepted,
                 r.draft_n > 0 ? 100.0 * r.draft_n_accepted / r.draft_n : 0.0, r.spec_steps);
  }
  return 0;
}

// -cnv: a conversation. Turn 1 is -p/-f (when given), then one user message per stdin line until
// EOF (a "> " prompt when stdin is a terminal). Each turn renders the whole conversation with the
// chat template (server::ChatTemplate: the same code as `rocky serve`), evaluates only what the
// context does not hold yet, and generates until end-of-generation or -n tokens. stdout gets the
// replies, one line each (--json: one object per turn).
int run_chat(const RunOpts& o) {
  if (o.n_predict < -1) fail("-n must be ≥ -1 (got {})", o.n_predict);
  auto model = model::Model::load(o.model);
  auto tok = tok::Tokenizer::from_gguf(model->file());
  if (tok.vocab().size() > static_cast<size_t>(model->hparams().n_vocab)) {
    fail("{}: the vocab has {} tokens but token_embd.weight has only {} rows", o.model, tok.vocab().size(),
         model->hparams().n_vocab);
  }
  const server::ChatTemplate tmpl =
      server::ChatTemplate::load(model->file(), tok, o.chat_template_file, o.chat_template);
  if (tmpl.is_fallback() && o.chat_template_file.empty() && o.chat_template.empty())
    fmt::print(stderr, "rocky: warning: the model has no chat template; using ChatML\n");
  runtime::BackendOptions bo;
  bo.device = o.device;
  bo.matmul = o.matmul;
  bo.kv_f16 = kv_cache_f16(o.kv);
  bo.env = process_env();
  runtime::Session session(*model, runtime::make_backend(bo),
                           runtime::SessionOptions{o.n_ctx, o.n_ubatch, true, o.swa_full});
  runtime::SessionSource src(session);
  runtime::Generator generator(src, tok);
  if (o.spec_type == "lab-alpha") fail("--spec-type lab-alpha measures one -p run; it does not drive a conversation");
  Speculation spec = make_speculation(o, session, tok, o.sp);
  nlohmann::json messages = nlohmann::json::array();
  if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
  std::vector<int32_t> held;  // the tokens the context holds
  const bool tty = isatty(STDIN_FILENO) != 0;

  auto turn = [&](const std::string& user) {
    messages.push_back({{"role", "user"}, {"content", user}});
    server::TemplateInputs in;
    in.messages = messages;
    const std::string prompt = tmpl.render(in);
    const std::vector<int32_t> ids = server::tokenize_chat_prompt(tmpl, tok, prompt);
    if (static_cast<int64_t>(ids.size()) > session.n_ctx())
      fail("the conversation has {} tokens, more than the context size {} (raise -c)", ids.size(), session.n_ctx());
    // Keep what the context already holds when the new prompt extends it; else start over.
    size_t keep = 0;
    while (keep < held.size() && keep < ids.size() && held[keep] == ids[keep]) ++keep;
    if (keep != held.size() || keep >= ids.size() || static_cast<int32_t>(keep) != session.n_past()) {
      session.reset();
      keep = 0;
    }
    runtime::GenerateParams gp;
    gp.sampling = o.sp;
    gp.max_tokens = o.n_predict;
    gp.ignore_eos = o.ignore_eos;
    gp.n_cached = static_cast<int32_t>(keep);
    gp.grammar = make_constraint(o, tok);
    set_speculation(o, gp, spec.drafter.get());
    auto on_token = [&](const runtime::TokenEvent& ev) {
      if (!o.json) {
        fmt::print("{}", ev.text);
        std::fflush(stdout);
      }
      return true;
    };
    const runtime::GenerateResult r = generator.generate(ids, gp, on_token);
    held = ids;
    const size_t fed = r.reason == runtime::StopReason::Eog || r.tokens.empty() ? r.tokens.size() : r.tokens.size() - 1;
    held.insert(held.end(), r.tokens.begin(), r.tokens.begin() + static_cast<std::ptrdiff_t>(fed));
    if (static_cast<int32_t>(held.size()) != session.n_past()) held.clear();  // (not expected) start over next turn
    messages.push_back({{"role", "assistant"}, {"content", r.text}});
    if (o.json) {
      nlohmann::json j;
      j["prompt"] = prompt;
      j["prompt_ids"] = ids;
      j["n_cached"] = r.n_cached;
      j["generated_ids"] = r.tokens;
      j["text"] = r.text;
      j["finish"] = runtime::stop_reason_name(r.reason);
      fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      fmt::print("\n");
    }
    std::fflush(stdout);
    if (r.reason == runtime::StopReason::ContextFull)
      fmt::print(stderr, "rocky: context full ({} tokens)\n", session.n_ctx());
  };

  const bool first = !o.prompt.empty() || !o.prompt_file.empty();
  if (first) turn(o.prompt_file.empty() ? o.prompt : read_text(o.prompt_file));
  if (o.single_turn && first) return 0;  // -st without -p/-f: the one turn is stdin's first line
  std::string line;
  for (;;) {
    if (tty) {
      fmt::print("> ");
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    turn(line);
    if (o.single_turn) break;
  }
  return 0;
}

}  // namespace

void add_run(CLI::App& app, Runner& run) {
  auto o = std::make_shared<RunOpts>();
  auto* sub = app.add_subcommand("run", "Generate text from a prompt");
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  auto* p = sub->add_option("-p,--prompt", o->prompt, "Prompt text");
  auto* f = sub->add_option("-f,--file", o->prompt_file, "Read the prompt from a file");
  p->excludes(f);
  f->excludes(p);
  sub->add_option("-n,--n-predict", o->n_predict,
                  "Tokens to generate (default 32; -1 = until end-of-generation or a full context, as llama.cpp)")
      ->check(CLI::Range(-1, INT32_MAX));
  sub->add_option("--device", o->device,
                  "Backend: auto (default: the first Vulkan GPU, else the CPU), vulkan[:N], cpu");
  sub->add_option("--matmul", o->matmul,
                  "Prefill matmul kernels: auto (= mmq), mmq (int8: q8_1 activations), mm (f32 tiles), basic")
      ->check(CLI::IsMember({"auto", "mmq", "mm", "basic"}))
      ->capture_default_str();
  sub->add_option("-c,--ctx-size", o->n_ctx, "Context size in tokens (0 = the model's, at most 4096)")
      ->check(CLI::Range(0, INT32_MAX));
  sub->add_option("--ub,--ubatch-size", o->n_ubatch, "Prompt tokens per ubatch (-ub also works; default 512)")
      ->check(CLI::Range(1, INT32_MAX));
  sub->add_flag("--swa-full", o->swa_full,
                "Sliding-window layers keep KV for every position instead of a ring of window + ubatch cells");
  sub->add_option("--temp", o->sp.temp, "Temperature (default 0.8; 0 or below = greedy, as llama.cpp's --temp)")
      ->check(finite_number());
  sub->add_option("--top-k", o->sp.top_k, "Top-k (default 40; 0 = off)");
  sub->add_option("--top-p", o->sp.top_p, "Top-p (default 0.95; 1 = off)")->check(finite_number());
  sub->add_option("--min-p", o->sp.min_p, "Min-p (default 0.05; 0 = off)")->check(finite_number());
  sub->add_option("--repeat-penalty", o->sp.repeat_penalty, "Repetition penalty (default 1 = off)")
      ->check(finite_number(0.0));
  sub->add_option("--repeat-last-n", o->sp.repeat_last_n, "Tokens the penalty looks back (default 64)");
  sub->add_option("--presence-penalty", o->sp.presence_penalty, "Presence penalty (default 0 = off)")
      ->check(CLI::Range(-2.0, 2.0));
  sub->add_option("--frequency-penalty", o->sp.frequency_penalty, "Frequency penalty (default 0 = off)")
      ->check(CLI::Range(-2.0, 2.0));
  add_sampler_flags(sub, o->sp, "");
  sub->add_option_function<int64_t>(
         "-s,--seed", [o](int64_t v) { o->sp.seed = v < 0 ? runtime::k_default_seed : static_cast<uint32_t>(v); },
         "RNG seed (default: random; -1 = random, as llama.cpp)")
      ->check(CLI::Range(int64_t{-1}, int64_t{UINT32_MAX}));
  sub->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at end-of-generation tokens");
  sub->add_flag("--json", o->json, "Print one JSON object (prompt_ids, generated_ids, text, timings)");
  sub->add_option("--grammar", o->grammar, "Constrain the output to this GBNF grammar (llama.cpp syntax)");
  sub->add_option("--grammar-file", o->grammar_file, "Constrain the output to the GBNF grammar in this file");
  sub->add_option("-j,--json-schema", o->json_schema, "Constrain the output to JSON valid against this schema (text)");
  sub->add_option("--json-schema-file", o->json_schema_file, "Constrain the output to this JSON Schema file");
  sub->add_option("--dump-logits", o->dump_logits, "Write the last prompt position's logits (f32 LE)");
  sub->add_option("--dump-all-logits", o->dump_all_logits, "Write every prompt position's logits (f32 LE)");
  sub->add_flag("--cnv,--conversation,--chat", o->chat,
                "Conversation through the chat template (-cnv also works): -p is the first user message, then one per "
                "stdin line");
  sub->add_option("--sys,--system-prompt", o->system, "System message of the conversation (-sys also works)");
  sub->add_option("--chat-template-file", o->chat_template_file,
                  "Jinja chat template; overrides the model's (ChatML when it has none)");
  sub->add_option(
         "--chat-template", o->chat_template,
         "Chat template: a llama.cpp built-in name (chatml, llama3, gemma, mistral-v7, phi4, deepseek3, ...) or "
         "a Jinja template")
      ->excludes("--chat-template-file");
  sub->add_option("--cache-dir", o->cache_dir,
                  "Prefix cache directory: reuse the K/V of prompt blocks computed by earlier runs");
  sub->add_option("--cache-block", o->cache_block, "Prefix cache: tokens per block (1 .. 256, default 256)")
      ->check(CLI::Range(1, 256));
  sub->add_option("--cache-disk", o->cache_disk_mib, "Prefix cache: disk budget in MiB (default 8192)")
      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 40));
  sub->add_flag("--st,--single-turn", o->single_turn,
                "With -cnv: one turn only: -p/-f, else stdin's first line (-st also works)");
  sub->add_option("--spec-type", o->spec_type,
                  "Speculative decoding drafter: none (default), ngram-simple (prompt lookup: the last n tokens "
                  "looked up earlier in the prompt and output), lab-alpha (measurement only: the target's own greedy "
                  "output, corrupted with probability 1 - --spec-lab-alpha); -md MODEL drafts with a model")
      ->check(CLI::IsMember({"none", "ngram-simple", "lab-alpha"}));
  sub->add_option("--md,--model-draft", o->draft_model,
                  "Draft model for speculative decoding (-md also works): the target's vocabulary, a pure-attention "
                  "model; runs on the target's device");
  sub->add_option("--draft-max,--draft,--draft-n,--spec-draft-n-max", o->draft_max,
                  "Speculation: most drafted tokens per step (default 16)")
      ->check(CLI::Range(1, 256));
  sub->add_option("--draft-min,--spec-draft-n-min", o->draft_min,
                  "Speculation: fewer drafted tokens are not evaluated (default 0)")
      ->check(CLI::Range(0, 256));
  sub->add_option("--draft-p-min", o->draft_p_min,
                  "Draft model: stop drafting where its most likely token is below this probability (default 0.75)")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--spec-ngram-size-n,--spec-ngram-simple-size-n", o->ngram_n,
                  "ngram-simple: tokens of the looked-up key (default 3)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--spec-ngram-size-m,--spec-ngram-simple-size-m", o->ngram_m,
                  "ngram-simple: most tokens drafted from one match (default 48; --draft-max caps it)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--spec-lab-alpha", o->lab_alpha,
                  "lab-alpha: probability that a drafted token is the target's own (default 0.8; measurement only)")
      ->check(CLI::Range(0.0, 1.0));
  add_kv_cache_flags(sub, o->kv);
  add_ignored(sub,
              {"--ngl,--n-gpu-layers,--gpu-layers", "-t,--threads", "--tb,--threads-batch", "-b,--batch-size",
               "--fa,--flash-attn", "--numa"},
              {"--mlock", "--no-mmap", "--mmap", "--jinja"}, "llama-cli");
  sub->callback([&run, o, p, f, sub] {
    if (!o->chat && p->count() == 0 && f->count() == 0) throw CLI::RequiredError("-p or -f");
    // A speculation flag without the drafter it tunes would be silently ignored: a usage error.
    const auto needs = [sub](const char* flag, bool ok, const char* what) {
      if (sub->count(flag) > 0 && !ok) throw CLI::ValidationError(flag, std::string("needs ") + what);
    };
    const bool any = o->spec_type != "none" || !o->draft_model.empty();
    needs("--spec-lab-alpha", o->spec_type == "lab-alpha", "--spec-type lab-alpha");
    needs("--spec-ngram-size-n", o->spec_type == "ngram-simple", "--spec-type ngram-simple");
    needs("--spec-ngram-size-m", o->spec_type == "ngram-simple", "--spec-type ngram-simple");
    needs("--draft-p-min", !o->draft_model.empty(), "a draft model (-md)");
    needs("--draft-max", any, "a drafter (--spec-type or -md)");
    needs("--draft-min", any, "a drafter (--spec-type or -md)");
    const std::vector<std::string> notes = ignored_given(sub);
    run = [o, notes] {
      print_ignored(notes);
      return o->chat ? run_chat(*o) : run_run(*o);
    };
  });
}

}  // namespace rocky::cli
