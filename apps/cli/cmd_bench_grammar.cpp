// rocky bench-grammar -m MODEL (--json-schema FILE|DIR | --grammar-file FILE) [--tokens N] [--seed S] [--json]
// Compiles the constraint against the model's vocabulary and drives the matcher over N tokens drawn
// uniformly from each step's mask (restarting when the end-of-generation token is drawn or no token
// is allowed), timing every mask. Prints compile time and the per-token mask time (median, p99,
// max). A directory of schemas gives one row per file and a summary over the set.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "commands.hpp"
#include "grammar/gbnf.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::cli {
namespace {

struct BenchGrammarOpts {
  std::string model;
  std::string schema;
  std::string grammar_file;
  int tokens = 1000;
  uint32_t seed = 1;
  bool json = false;
};

struct Row {
  std::string name;
  std::string error;
  double compile_ms = 0;
  double median_us = 0, p99_us = 0, max_us = 0, mean_us = 0;
  int tokens = 0, restarts = 0;
  size_t states = 0;
  size_t trie_walks = 0;  // walks of the whole vocabulary trie (new keys), compile included
};

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("{}: cannot read", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

Row bench_one(const std::string& name, const std::string& gbnf_text,
              const std::shared_ptr<const grammar::TokenTrie>& trie, const BenchGrammarOpts& o) {
  Row r;
  r.name = name;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(gbnf_text), trie);
  r.compile_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  grammar::Matcher m(g);
  std::mt19937 rng(o.seed);
  std::vector<double> us;
  us.reserve(static_cast<size_t>(o.tokens));
  for (int i = 0; i < o.tokens; ++i) {
    const auto a = clock::now();
    const std::vector<uint64_t>& mask = m.mask();
    const auto b = clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(b - a).count());
    size_t n = 0;
    for (uint64_t w : mask) n += static_cast<size_t>(__builtin_popcountll(w));
    if (n == 0) {
      m.reset();
      ++r.restarts;
      continue;
    }
    size_t k = rng() % n;
    int32_t pick = -1;
    for (size_t w = 0; w < mask.size() && pick < 0; ++w) {
      const auto c = static_cast<size_t>(__builtin_popcountll(mask[w]));
      if (k >= c) {
        k -= c;
        continue;
      }
      uint64_t bits = mask[w];
      for (size_t j = 0; j < k; ++j) bits &= bits - 1;
      pick = static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
    }
    if (!m.accept(pick)) fail("{}: the matcher refused token {} that its own mask allowed", name, pick);
    if (m.finished()) {
      m.reset();
      ++r.restarts;
    }
  }
  r.tokens = o.tokens;
  r.median_us = pct(us, 0.5);
  r.p99_us = pct(us, 0.99);
  r.max_us = pct(us, 1.0);
  double sum = 0;
  for (double x : us) sum += x;
  r.mean_us = us.empty() ? 0 : sum / static_cast<double>(us.size());
  r.states = g->n_states();
  r.trie_walks = g->n_trie_walks();
  return r;
}

int run_bench_grammar(const BenchGrammarOpts& o) {
  if (o.schema.empty() == o.grammar_file.empty()) fail("give exactly one of --json-schema and --grammar-file");
  if (o.tokens < 1) fail("--tokens must be at least 1");
  const auto tok = tok::Tokenizer::load(o.model);
  const auto t0 = std::chrono::steady_clock::now();
  const auto trie = grammar::TokenTrie::build(tok);
  const double trie_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  std::vector<std::pair<std::string, std::string>> inputs;  // name, path
  bool is_schema = !o.schema.empty();
  const std::string path = is_schema ? o.schema : o.grammar_file;
  if (std::filesystem::is_directory(path)) {
    for (const auto& e : std::filesystem::directory_iterator(path))
      if (e.path().extension() == (is_schema ? ".json" : ".gbnf"))
        inputs.emplace_back(e.path().filename().string(), e.path().string());
    std::sort(inputs.begin(), inputs.end());
    if (inputs.empty()) fail("{}: no {} files", path, is_schema ? ".json" : ".gbnf");
  } else {
    inputs.emplace_back(std::filesystem::path(path).filename().string(), path);
  }
  std::vector<Row> rows;
  for (const auto& [name, file] : inputs) {
    try {
      const std::string text = read_text(file);
      std::string gbnf;
      if (is_schema) {
        nlohmann::json s;
        try {
          s = nlohmann::json::parse(text);
        } catch (const nlohmann::json::exception& e) {
          fail("{}: not JSON: {}", file, e.what());
        }
        gbnf = grammar::json_schema_to_gbnf(s);
      } else {
        gbnf = text;
      }
      rows.push_back(bench_one(name, gbnf, trie, o));
    } catch (const Error& e) {
      if (inputs.size() == 1) throw Error(fmt::format("{}: {}", file, e.what()));
      Row r;
      r.name = name;
      r.error = e.what();
      rows.push_back(r);
    }
  }
  std::vector<double> compiles, medians, p99s;
  int errors = 0;
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      ++errors;
      continue;
    }
    compiles.push_back(r.compile_ms);
    medians.push_back(r.median_us);
    p99s.push_back(r.p99_us);
  }
  const double c_med = pct(compiles, 0.5), m_med = pct(medians, 0.5), m_max = pct(medians, 1.0);
  const double p_med = pct(p99s, 0.5), p_max = pct(p99s, 1.0);
  if (o.json) {
    nlohmann::json j;
    j["model"] = o.model;
    j["n_vocab"] = trie->n_vocab();
    j["trie_nodes"] = trie->n_nodes();
    j["trie_build_ms"] = trie_ms;
    j["tokens_per_input"] = o.tokens;
    j["seed"] = o.seed;
    j["results"] = nlohmann::json::array();
    for (const Row& r : rows) {
      nlohmann::json x = {{"name", r.name}};
      if (!r.error.empty()) {
        x["error"] = r.error;
      } else {
        x["compile_ms"] = r.compile_ms;
        x["mask_us"] = {{"median", r.median_us}, {"p99", r.p99_us}, {"max", r.max_us}, {"mean", r.mean_us}};
        x["restarts"] = r.restarts;
        x["states"] = r.states;
        x["trie_walks"] = r.trie_walks;
      }
      j["results"].push_back(x);
    }
    j["summary"] = {{"inputs", rows.size()},       {"errors", errors},
                    {"compile_ms_median", c_med},  {"mask_us_median", m_med},
                    {"mask_us_median_max", m_max}, {"mask_us_p99_median", p_med},
                    {"mask_us_p99_max", p_max}};
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("vocabulary: {} tokens, {} trie nodes (built in {:.1f} ms); {} tokens per input, seed {}\n",
               trie->n_vocab(), trie->n_nodes(), trie_ms, o.tokens, o.seed);
    fmt::print("{:<52} {:>10} {:>10} {:>10} {:>10} {:>8} {:>6}\n", "input", "compile ms", "median us", "p99 us",
               "max us", "states", "walks");
    for (const Row& r : rows) {
      if (!r.error.empty())
        fmt::print("{:<52} error: {}\n", r.name, r.error);
      else
        fmt::print("{:<52} {:>10.2f} {:>10.2f} {:>10.1f} {:>10.1f} {:>8} {:>6}\n", r.name, r.compile_ms, r.median_us,
                   r.p99_us, r.max_us, r.states, r.trie_walks);
    }
    if (rows.size() > 1)
      fmt::print(
          "summary: {} inputs, {} errors; compile median {:.2f} ms; mask median {:.2f} us (worst input {:.2f}); "
          "p99 median {:.1f} us (worst input {:.1f})\n",
          rows.size(), errors, c_med, m_med, m_max, p_med, p_max);
  }
  return errors ? 1 : 0;
}

}  // namespace

void add_bench_grammar(CLI::App& app, Runner& run) {
  auto o = std::make_shared<BenchGrammarOpts>();
  auto* sub =
      app.add_subcommand("bench-grammar", "Time grammar compilation and per-token masks on a model's vocabulary");
  sub->add_option("-m,--model", o->model, "GGUF file (only its vocabulary is read)")->required();
  sub->add_option("-j,--json-schema", o->schema, "JSON Schema file, or a directory of them (one row each)");
  sub->add_option("--grammar-file", o->grammar_file, "GBNF file, or a directory of .gbnf files");
  sub->add_option("-n,--tokens", o->tokens, "Tokens to draw per input (default 1000)");
  sub->add_option("-s,--seed", o->seed, "Seed for the token draws (default 1)");
  sub->add_flag("--json", o->json, "Print the results as JSON");
  sub->callback([&run, o] { run = [o] { return run_bench_grammar(*o); }; });
}

}  // namespace rocky::cli
