// rocky bench (see bench.hpp).
#include "runtime/bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>

#include "backend/vulkan/ops/ops.hpp"
#include "core/build_info.hpp"
#include "core/error.hpp"
#include "grammar/constraint.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/generator.hpp"
#include "runtime/session.hpp"
#include "runtime/speculative.hpp"
#include "runtime/warmup.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::runtime {
namespace {

// Warm-up: the test is repeated until the device has been busy this long (at least once, at most
// k_warmup_max_runs times): on the H200 a single 57 ms prefill left the clocks low for the first timed
// repetition (4,237 vs 9,010 t/s; docs/tuning-log.md #12).
constexpr double k_warmup_s = 0.5;
constexpr int k_warmup_max_runs = 20;

// llama.cpp's llama_ftype names (llama_model_ftype_name) for the types rocky writes.
std::string ftype_name(uint64_t ft) {
  switch (ft) {  // llama.cpp's names of the llama_ftype values (llama-bench's model column)
    case 0: return "all F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K - Medium";
    case 11: return "Q3_K - Small";
    case 12: return "Q3_K - Medium";
    case 13: return "Q3_K - Large";
    case 14: return "Q4_K - Small";
    case 15: return "Q4_K - Medium";
    case 16: return "Q5_K - Small";
    case 17: return "Q5_K - Medium";
    case 18: return "Q6_K";
    case 32: return "BF16";
    default: return fmt::format("ftype {}", ft);
  }
}

// A file without general.file_type: the type of most weight bytes (llama.cpp guesses the same way).
std::string guessed_ftype(const gguf::GgufFile& f) {
  std::map<std::string, uint64_t> bytes;
  for (const auto& t : f.tensors()) bytes[std::string(dtype_name(t.type))] += t.n_bytes;
  if (bytes.empty()) return "?";
  const auto best = std::max_element(bytes.begin(), bytes.end(), [](auto& a, auto& b) { return a.second < b.second; });
  return best->first == "f32" ? "all F32" : "guessed " + best->first;
}

// llama-bench's model column: arch, size, file type. Sizes below 1 B parameters in M (0.00B said
// nothing for the test models).
std::string model_label(const model::Model& m, uint64_t n_params) {
  const auto& f = m.file();
  const std::string t =
      f.get_uint("general.file_type") ? ftype_name(*f.get_uint("general.file_type")) : guessed_ftype(f);
  const std::string size = n_params >= 1'000'000'000 ? fmt::format("{:.2f}B", double(n_params) / 1e9)
                                                     : fmt::format("{:.1f}M", double(n_params) / 1e6);
  return fmt::format("{} {} {}", m.hparams().arch_str, size, t);
}

struct Timer {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double ns() const {
    return double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  }
};

void stats(BenchRow& r, const std::vector<double>& ns, int64_t tokens) {
  r.samples_ts.clear();
  double sum_ns = 0;
  for (double t : ns) {
    r.samples_ts.push_back(double(tokens) * 1e9 / t);
    sum_ns += t;
  }
  const double n = double(r.samples_ts.size());
  double mean = 0;
  for (double v : r.samples_ts) mean += v;
  mean /= n;
  double var = 0;
  for (double v : r.samples_ts) var += (v - mean) * (v - mean);
  r.avg_ts = mean;
  r.stddev_ts = r.samples_ts.size() > 1 ? std::sqrt(var / (n - 1)) : 0.0;
  r.avg_ns = sum_ns / n;
}

std::string human_bytes(uint64_t b) {
  const double g = double(b) / double(1ull << 30);
  if (g >= 1.0) return fmt::format("{:.2f} GiB", g);
  return fmt::format("{:.2f} MiB", double(b) / double(1ull << 20));
}

nlohmann::json row_json(const BenchRow& r) {
  return nlohmann::json{
      {"model", r.model},
      {"model_file", r.model_file},
      {"model_size", r.model_size},
      {"model_n_params", r.model_n_params},
      {"backend", r.backend},
      {"n_ubatch", r.n_ubatch},
      {"n_prompt", r.n_prompt},
      {"n_gen", r.n_gen},
      {"n_depth", r.n_depth},
      {"n_pl", r.n_pl},
      {"test", r.test},
      {"reps", r.reps},
      {"samples_ts", r.samples_ts},
      {"avg_ts", r.avg_ts},
      {"stddev_ts", r.stddev_ts},
      {"avg_ns", r.avg_ns},
      {"peak_device_memory", r.peak_device_memory},
      {"memory",
       {{"weights", r.memory.weights}, {"kv", r.memory.kv}, {"arena", r.memory.arena}, {"other", r.memory.other}}},
      {"kv_bytes",
       {{"full", r.kv_bytes.full},
        {"sliding_window", r.kv_bytes.sliding_window},
        {"recurrent", r.kv_bytes.recurrent},
        {"unused", r.kv_bytes.unused}}},
      {"kv_bytes_per_token", {{"full", r.kv_per_token.full}, {"sliding_window", r.kv_per_token.sliding_window}}},
      {"n_ctx", r.n_ctx},
      {"kv_cells_per_seq", {{"full", r.n_ctx}, {"sliding_window", r.swa_cells}}},
      {"type_k", r.type_k},
      {"type_v", r.type_v},
      {"flops_per_token", r.flops_per_token},
      {"tflops", r.tflops},
      {"bytes_per_token", r.bytes_per_token},
      {"gbs", r.gbs},
      {"roof_kind", r.roof_kind},
      {"roof_pct", r.roof_pct},
      {"matmul_path", r.matmul_path},
      {"tiles", r.tiles},
      {"build_commit", r.build_commit},
      {"driver", r.driver},
      {"tune_profile", r.tune_profile},
      {"overrides", r.overrides},
      {"profile", r.profile.is_null() ? nlohmann::json::array() : r.profile},
      {"host_ms_per_ubatch", r.host_ms_per_ubatch.is_null() ? nlohmann::json::object() : r.host_ms_per_ubatch},
      {"spec", r.spec},
      {"draft_n", r.draft_n},
      {"draft_n_accepted", r.draft_n_accepted},
      {"plain_ts", r.plain_ts},
      {"constraint", r.constraint},
      {"constrained_tokens", r.constrained_tokens},
      {"grammar_ms_per_token", r.grammar_ms_per_token}};
}

// Host split per ubatch of the timed repetitions (see BenchRow::host_ms_per_ubatch).
nlohmann::json host_split(Session& s, const std::vector<double>& ns) {
  const EvalTiming& t = s.timing();
  if (t.ubatches == 0) return nlohmann::json::object();
  const double u = double(t.ubatches);
  double wall = 0;
  for (double v : ns) wall += v * 1e-6;
  nlohmann::json j{{"graph", t.graph_ms / u}, {"plan", t.plan_ms / u}};
  double inside = t.graph_ms + t.plan_ms + t.compute_ms;
  const backend::ContextStats cs = s.context().stats();
  if (s.backend().stats().kind != "cpu") {  // the GPU's split of compute (none on the CPU oracle)
    const backend::HostTiming& h = cs.host;
    j["setup"] = h.setup_ms / u;
    j["record"] = h.record_ms / u;
    j["submit_wait"] = h.submit_wait_ms / u;
    j["readback"] = h.readback_ms / u;
    j["dispatches"] = double(h.dispatches) / u;
    j["replayed"] = double(h.replays) / u;  // fraction of ubatches whose command buffer was replayed
    j["compute_other"] = (t.compute_ms - h.setup_ms - h.record_ms - h.submit_wait_ms - h.readback_ms) / u;
  } else {
    j["compute"] = t.compute_ms / u;
  }
  j["other"] = (wall - inside) / u;
  return j;
}

void reset_timing(Session& s) {
  s.reset_timing();
  s.context().reset_host_timing();
}

std::string split_line(const nlohmann::json& j) {
  std::string out;
  for (auto& [k, v] : j.items()) out += fmt::format("{}{} {:.3f}", out.empty() ? "" : ", ", k, v.get<double>());
  return out;
}

}  // namespace

uint64_t bytes_per_token(const model::Model& m) {
  uint64_t b = 0;
  bool has_output = false;
  const gguf::TensorInfo* embd = nullptr;
  for (const auto& t : m.file().tensors()) {
    if (t.name == "output.weight") has_output = true;
    if (t.name == "token_embd.weight") {
      embd = &t;
      continue;
    }
    b += t.n_bytes;
  }
  if (embd) b += has_output ? row_bytes(embd->type, embd->ne[0]) : embd->n_bytes;  // one row, or the tied head
  return b;
}

double flops_per_token(const model::Model& m, double ctx_avg) {
  const auto& hp = m.hparams();
  double w = 0;
  bool has_output = false;
  const gguf::TensorInfo* embd = nullptr;
  for (const auto& t : m.file().tensors()) {
    if (t.name == "output.weight") has_output = true;
    if (t.name == "token_embd.weight") {
      embd = &t;
      continue;
    }
    if (t.ne[1] > 1 && t.ne[2] == 1 && t.ne[3] == 1) w += double(t.ne[0]) * double(t.ne[1]);
  }
  if (!has_output && embd) w += double(embd->ne[0]) * double(embd->ne[1]);  // tied output head
  // Attention over the context (QK and PV) in the attention layers; a hybrid model's recurrent
  // layers instead do the delta rule per value head: decay, Sᵀk, the rank-1 update and Sᵀq ≈ 7·d_k·d_v.
  int n_attn = 0;
  for (int il = 0; il < hp.n_layer; ++il) n_attn += hp.is_recurrent_layer(il) ? 0 : 1;
  const double attn = 4.0 * n_attn * double(hp.n_head) * hp.head_dim * ctx_avg;
  const double delta =
      7.0 * (hp.n_layer - n_attn) * double(hp.ssm_dt_rank) * double(hp.ssm_d_state) * double(hp.ssm_head_v_dim());
  return 2.0 * w + attn + delta;
}

BenchRoofline load_roofline_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("--roofline-json: cannot open '{}'", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
    BenchRoofline r;
    r.fp32_tflops = j.at("fp32_tflops").get<double>();
    r.int8_dot_tops = j.at("int8_dot_tops").get<double>();
    r.copy_gbs = j.at("copy_gbs").get<double>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    fail("--roofline-json '{}': not the output of `rocky roofline --json` ({})", path, e.what());
  }
}

namespace {

// GPU time per op of a context's last compute() (pp: the last prefill ubatch; tg: the last decode
// step; -npl: the last step), summed over layers: [{op, ms, dispatches}].
nlohmann::json profile_of(const backend::Context& c) {
  std::map<std::string, std::pair<double, int>> by_op;
  for (const auto& t : c.stats().ops) {
    std::string key = t.label;
    if (key.rfind("blk.", 0) == 0) key = key.substr(key.find('.', 4) + 1);
    by_op[key].first += t.ms;
    by_op[key].second += 1;
  }
  nlohmann::json prof = nlohmann::json::array();
  for (auto& [k, v] : by_op) prof.push_back({{"op", k}, {"ms", v.first}, {"dispatches", v.second}});
  return prof;
}

std::string test_name(std::string t, int32_t d) { return d > 0 ? fmt::format("{} @ d{}", t, d) : t; }

// What the rows of one -ub share: its session, the seeded tokens, the row every test starts from.
struct UbBench {
  const BenchParams& p;
  const model::Model& model;
  Session& s;
  const std::vector<int32_t>& tokens;        // the timed runs' (seeded random)
  const std::vector<int32_t>& depth_tokens;  // what the KV holds before a timed run
  int32_t ub;
  BenchRow base;
  const std::function<void(const std::string&)>& log;

  // s.reset(), then the depth's tokens (untimed): the KV state a timed run starts from.
  void reset_to(int32_t d) {
    s.reset();
    if (d > 0) s.eval(std::span<const int32_t>(depth_tokens.data(), static_cast<size_t>(d)));
  }
  // The kernels the last prefill ubatch used: "mmq" (int8 path), else the option's f32 kernels.
  std::string path_used() const { return s.context().stats().matmul_path; }
  nlohmann::json profile_by_op() const { return profile_of(s.context()); }
};

// "pp N [@ dD]": N prompt tokens in ubatches of -ub after D untimed positions.
BenchRow bench_pp(UbBench& b, int32_t depth, int32_t np) {
  BenchRow r = b.base;
  r.n_prompt = np;
  r.n_depth = depth;
  r.test = test_name(fmt::format("pp{}", np), depth);
  std::span<const int32_t> tok(b.tokens.data(), static_cast<size_t>(np));
  if (b.p.warmup) {  // until the device is busy ≥ k_warmup_s (GPU clocks ramp up; docs/tuning-log.md #12)
    b.log(fmt::format("bench: ub {} {} warm-up", b.ub, r.test));
    Timer w;
    for (int i = 0; i < k_warmup_max_runs && (i == 0 || w.ns() < k_warmup_s * 1e9); ++i) {
      b.reset_to(depth);
      b.s.eval(tok);
    }
  }
  std::vector<double> ns;
  for (int32_t i = 0; i < b.p.reps; ++i) {
    b.log(fmt::format("bench: ub {} {} rep {}/{}", b.ub, r.test, i + 1, b.p.reps));
    b.reset_to(depth);
    if (i == 0) reset_timing(b.s);
    Timer t;
    b.s.eval(tok);
    ns.push_back(t.ns());
  }
  stats(r, ns, np);
  // At a depth the untimed prefill of later repetitions would be counted too: no split then.
  r.host_ms_per_ubatch = depth == 0 ? host_split(b.s, ns) : nlohmann::json::object();
  b.log(fmt::format("bench: ub {} {} host ms per ubatch: {}", b.ub, r.test, split_line(r.host_ms_per_ubatch)));
  r.matmul_path = b.path_used();
  const bool mmq = r.matmul_path == "mmq";
  r.flops_per_token = flops_per_token(b.model, depth + (np + 1) / 2.0);
  r.tflops = r.avg_ts * r.flops_per_token / 1e12;
  if (b.p.roofline) {
    const double peak = mmq ? b.p.roofline->int8_dot_tops : b.p.roofline->fp32_tflops;
    r.roof_kind = mmq ? "int8_dot" : "fp32";
    r.roof_pct = peak > 0 ? 100.0 * r.tflops / peak : 0.0;
  }
  if (b.p.profile) r.profile = b.profile_by_op();
  return r;
}

// "tg N [@ dD]": N decode steps of one token after D untimed positions.
BenchRow bench_tg(UbBench& b, int32_t depth, int32_t ng) {
  BenchRow r = b.base;
  r.n_gen = ng;
  r.n_depth = depth;
  r.test = test_name(fmt::format("tg{}", ng), depth);
  auto gen = [&] {
    for (int32_t i = 0; i < ng; ++i) b.s.eval(std::span<const int32_t>(b.tokens.data() + i, 1));
  };
  if (b.p.warmup) {
    b.log(fmt::format("bench: ub {} {} warm-up", b.ub, r.test));
    Timer w;
    b.reset_to(depth);
    for (int i = 0; i < k_warmup_max_runs * 8 && (i == 0 || w.ns() < k_warmup_s * 1e9); ++i) {
      if (b.s.n_past() >= b.s.n_ctx()) b.reset_to(depth);
      b.s.eval(std::span<const int32_t>(b.tokens.data(), 1));
    }
  }
  std::vector<double> ns;
  for (int32_t i = 0; i < b.p.reps; ++i) {
    b.log(fmt::format("bench: ub {} {} rep {}/{}", b.ub, r.test, i + 1, b.p.reps));
    b.reset_to(depth);
    if (i == 0) reset_timing(b.s);
    Timer t;
    gen();
    ns.push_back(t.ns());
  }
  stats(r, ns, ng);
  // At a depth the untimed prefill of later repetitions would be counted too: no split then.
  r.host_ms_per_ubatch = depth == 0 ? host_split(b.s, ns) : nlohmann::json::object();
  b.log(fmt::format("bench: ub {} {} host ms per token: {}", b.ub, r.test, split_line(r.host_ms_per_ubatch)));
  if (b.p.profile) r.profile = b.profile_by_op();
  r.flops_per_token = flops_per_token(b.model, depth + ng / 2.0);
  r.tflops = r.avg_ts * r.flops_per_token / 1e12;
  r.bytes_per_token = bytes_per_token(b.model);
  r.gbs = r.avg_ts * double(r.bytes_per_token) / 1e9;
  if (b.p.roofline) {
    r.roof_kind = "copy";
    r.roof_pct = b.p.roofline->copy_gbs > 0 ? 100.0 * r.gbs / b.p.roofline->copy_gbs : 0.0;
  }
  return r;
}

// "ppP+tgN xS": S sequences in one context, each prefilled with the first -p prompt (untimed), then
// N steps that decode one token of every sequence in one ubatch.
BenchRow bench_npl(UbBench& b, int32_t npl, int32_t ng) {
  const int32_t npp = b.p.n_prompt.empty() ? 0 : b.p.n_prompt.front();
  BenchRow r = b.base;
  r.n_gen = ng;
  r.n_prompt = npp;
  r.n_pl = npl;
  r.test = fmt::format("pp{}+tg{} x{}", npp, ng, npl);
  const int32_t ctx_pl = std::max(npp + ng + 1, npl);
  const int32_t n_ring = b.model.swa_ring(ctx_pl, b.ub, b.p.swa_full);
  graph::Graph g0 = b.model.build_graph(model::UbatchSpec{1, 0, ctx_pl, model::Logits::LAST, 1, n_ring});
  r.kv_bytes = kv_bytes(b.model, ctx_pl, npl, b.s.context().kv_type(), &r.kv_per_token, n_ring);
  r.n_ctx = ctx_pl;
  r.swa_cells = n_ring > 0 ? n_ring : ctx_pl;
  check_kv_budget(r.kv_bytes, b.p.kv_budget_mib, fmt::format("{}: {} sequences of {} positions", r.test, npl, ctx_pl));
  auto ctx = b.s.backend().make_context(backend::ContextOptions{g0.kv, npl});
  std::map<std::pair<int32_t, int32_t>, std::pair<graph::Graph, graph::Plan>> shapes;  // (n, n_out)
  auto shape = [&](int32_t n, int32_t n_out) -> std::pair<graph::Graph, graph::Plan>& {
    auto it = shapes.find({n, n_out});
    if (it == shapes.end()) {
      model::UbatchSpec u{n, 0, ctx_pl, n_out > 0 ? model::Logits::LAST : model::Logits::NONE};
      u.n_out = std::max(n_out, 1);
      u.n_ring = n_ring;
      graph::Graph g = b.model.build_graph(u);
      graph::Plan pl = graph::plan_arena(g);
      it = shapes.emplace(std::make_pair(n, n_out), std::make_pair(std::move(g), std::move(pl))).first;
    }
    return it->second;
  };
  std::vector<float> logits(static_cast<size_t>(b.model.hparams().n_vocab) * static_cast<size_t>(npl));
  backend::HostTiming steps;  // host split of the timed decode steps (not the prefills)
  double steps_wall_ms = 0;
  auto run_once = [&] {  // returns the decode steps' wall ns
    ctx->reset();
    for (int32_t sq = 0; sq < npl; ++sq)
      for (int32_t i0 = 0; i0 < npp; i0 += b.ub) {
        const int32_t n = std::min(b.ub, npp - i0);
        auto& [g, pl] = shape(n, 0);
        g.seq.assign(static_cast<size_t>(n), sq);
        g.pos.resize(static_cast<size_t>(n));
        for (int32_t j = 0; j < n; ++j) g.pos[static_cast<size_t>(j)] = i0 + j;
        ctx->compute(g, pl, std::span<const int32_t>(b.tokens.data() + i0, static_cast<size_t>(n)), {});
      }
    auto& [g, pl] = shape(npl, npl);
    g.seq.resize(static_cast<size_t>(npl));
    g.pos.resize(static_cast<size_t>(npl));
    std::vector<int32_t> step(static_cast<size_t>(npl));
    const backend::HostTiming h0 = ctx->stats().host;
    Timer t;
    for (int32_t i = 0; i < ng; ++i) {
      for (int32_t sq = 0; sq < npl; ++sq) {
        g.seq[static_cast<size_t>(sq)] = sq;
        g.pos[static_cast<size_t>(sq)] = npp + i;
        step[static_cast<size_t>(sq)] = b.tokens[static_cast<size_t>((i + sq) % std::max<int32_t>(1, ng))];
      }
      ctx->compute(g, pl, step, logits);
    }
    const double wall_ns = t.ns();
    const backend::HostTiming h1 = ctx->stats().host;  // the decode steps' share (no prefill)
    steps.computes += h1.computes - h0.computes;
    steps.dispatches += h1.dispatches - h0.dispatches;
    steps.replays += h1.replays - h0.replays;
    steps.setup_ms += h1.setup_ms - h0.setup_ms;
    steps.record_ms += h1.record_ms - h0.record_ms;
    steps.submit_wait_ms += h1.submit_wait_ms - h0.submit_wait_ms;
    steps.readback_ms += h1.readback_ms - h0.readback_ms;
    steps_wall_ms += wall_ns * 1e-6;
    return wall_ns;
  };
  if (b.p.warmup) {
    b.log(fmt::format("bench: ub {} {} warm-up", b.ub, r.test));
    run_once();
  }
  steps = {};
  steps_wall_ms = 0;
  std::vector<double> ns;
  for (int32_t i = 0; i < b.p.reps; ++i) {
    b.log(fmt::format("bench: ub {} {} rep {}/{}", b.ub, r.test, i + 1, b.p.reps));
    ns.push_back(run_once());
  }
  stats(r, ns, int64_t{ng} * npl);
  // Per decode step (one token of each of the npl sequences), as host_split's per token.
  r.host_ms_per_ubatch = nlohmann::json::object();
  if (steps.computes > 0 && b.s.backend().stats().kind != "cpu") {
    const double u = double(steps.computes);
    nlohmann::json& j = r.host_ms_per_ubatch;
    j["step"] = steps_wall_ms / u;
    j["setup"] = steps.setup_ms / u;
    j["record"] = steps.record_ms / u;
    j["submit_wait"] = steps.submit_wait_ms / u;
    j["readback"] = steps.readback_ms / u;
    j["dispatches"] = double(steps.dispatches) / u;
    j["replayed"] = double(steps.replays) / u;
    j["other"] = (steps_wall_ms - steps.setup_ms - steps.record_ms - steps.submit_wait_ms - steps.readback_ms) / u;
  }
  b.log(fmt::format("bench: ub {} {} host ms per step: {}", b.ub, r.test, split_line(r.host_ms_per_ubatch)));
  if (b.p.profile) r.profile = profile_of(*ctx);  // GPU time per op of the last step
  r.flops_per_token = flops_per_token(b.model, npp + ng / 2.0);
  r.tflops = r.avg_ts * r.flops_per_token / 1e12;
  r.bytes_per_token = bytes_per_token(b.model);
  r.gbs = r.avg_ts / npl * double(r.bytes_per_token) / 1e9;  // the weights are read once per step
  return r;
}

constexpr int32_t k_spec_prompt = 64;

// "tgN spec:D": see BenchParams::spec.
BenchRow bench_spec(UbBench& b, int32_t ng, const std::string& spec) {
  BenchRow r = b.base;
  r.n_gen = ng;
  r.spec = spec;
  r.test = fmt::format("tg{} {}", ng, spec);
  const tok::Tokenizer tok = tok::Tokenizer::from_gguf(b.model.file());
  // A prompt whose second half repeats its first (something for prompt lookup to find).
  std::vector<int32_t> prompt(b.tokens.begin(), b.tokens.begin() + k_spec_prompt / 2);
  prompt.insert(prompt.end(), prompt.begin(), prompt.end());
  SessionSource src(b.s);
  Generator gen(src, tok);
  GenerateParams g;
  g.sampling.temp = 0;
  g.sampling.n_vocab = static_cast<int32_t>(std::min<size_t>(tok.vocab().size(), size_t(b.model.hparams().n_vocab)));
  g.max_tokens = ng;
  g.ignore_eos = true;
  g.draft_max = b.p.draft_max;
  auto plain_run = [&] {
    b.s.reset();
    return gen.generate(prompt, g);
  };
  const GenerateResult oracle = plain_run();
  std::unique_ptr<model::Model> dmodel;
  std::unique_ptr<Session> dsession;
  std::function<std::unique_ptr<Drafter>(uint32_t)> make;
  if (spec.rfind("lab:", 0) == 0) {
    double alpha = -1;
    try {
      alpha = std::stod(spec.substr(4));
    } catch (const std::exception&) {}
    if (!(alpha >= 0 && alpha <= 1)) fail("bench: --spec {}: alpha must be a number in [0, 1]", spec);
    make = [&, alpha](uint32_t seed) {
      return std::make_unique<LabDrafter>(oracle.tokens, prompt.size(), alpha, g.sampling.n_vocab, seed);
    };
  } else if (spec == "ngram") {
    make = [](uint32_t) { return std::make_unique<NgramDrafter>(3, 48); };
  } else if (spec.rfind("draft:", 0) == 0) {
    const std::string path = spec.substr(6);
    dmodel = model::Model::load(path);
    check_draft_vocab(tok.vocab(), tok::Tokenizer::from_gguf(dmodel->file()).vocab(), b.p.model, path);
    dsession = std::make_unique<Session>(*dmodel, b.s.shared_backend(), SessionOptions{b.s.n_ctx(), b.ub});
    make = [&](uint32_t) { return std::make_unique<ModelDrafter>(*dsession, g.sampling, g.sampling.n_vocab, 0.0f); };
  } else {
    fail("bench: --spec {}: expected lab:ALPHA, ngram or draft:MODEL", spec);
  }
  if (b.s.recurrent())
    fail("bench: --spec: {} has recurrent (linear-attention) layers; speculative decoding is off for it", b.p.model);
  if (b.p.warmup) {
    b.log(fmt::format("bench: ub {} {} warm-up", b.ub, r.test));
    auto d = make(0);
    GenerateParams gs = g;
    gs.drafter = d.get();
    b.s.reset();
    gen.generate(prompt, gs);
    // Every verification length the repetitions can meet (the drafts shrink where the output
    // nears its end): the kernels of each column count exist before a timed repetition needs them.
    warm_verifications(b.s, prompt.back(), b.p.draft_max + 1);  // as far as the context has room
  }
  std::vector<double> ns;
  double plain_ms = 0;
  for (int32_t i = 0; i < b.p.reps; ++i) {
    b.log(fmt::format("bench: ub {} {} rep {}/{}", b.ub, r.test, i + 1, b.p.reps));
    const GenerateResult pr = plain_run();
    plain_ms += pr.gen_ms;
    auto d = make(static_cast<uint32_t>(i + 1));
    GenerateParams gs = g;
    gs.drafter = d.get();
    b.s.reset();
    reset_timing(b.s);
    const backend::BackendStats bs0 = b.s.backend().stats();
    const GenerateResult sr = gen.generate(prompt, gs);
    const backend::BackendStats bs1 = b.s.backend().stats();
    // Each repetition's own figures: a slow one shows here whether its steps were replayed, how many
    // there were and where their host time went.
    b.log(
        fmt::format("bench: ub {} {} rep {}: {:.2f} t/s (plain {:.2f}), {} steps ({} drafted, {} accepted), "
                    "gpu {:.2f} of {:.2f} ms, matmuls {}, {} pipelines made ({:.1f} ms), host ms per ubatch: {}",
                    b.ub, r.test, i + 1, sr.gen_ms > 0 ? double(ng) / (sr.gen_ms / 1e3) : 0.0,
                    pr.gen_ms > 0 ? double(ng) / (pr.gen_ms / 1e3) : 0.0, sr.spec_steps, sr.draft_n,
                    sr.draft_n_accepted, sr.gen_gpu_ms, sr.gen_ms, b.s.context().stats().matmul_path,
                    bs1.pipelines - bs0.pipelines, bs1.pipeline_create_ms - bs0.pipeline_create_ms,
                    split_line(host_split(b.s, {(sr.prompt_ms + sr.gen_ms) * 1e6}))));
    if (sr.tokens != oracle.tokens)
      b.log(
          fmt::format("bench: {}: the speculative output differs from the plain one (numerics of the ubatch "
                      "shapes at a near-tie)",
                      r.test));
    // t/s = generated tokens / gen_ms (the first sample to the end), the plain run's alike.
    ns.push_back(sr.gen_ms * 1e6);
    r.draft_n += sr.draft_n;
    r.draft_n_accepted += sr.draft_n_accepted;
  }
  stats(r, ns, ng);
  r.plain_ts = plain_ms > 0 ? double(ng) * b.p.reps / (plain_ms / 1e3) : 0.0;
  b.log(fmt::format("bench: ub {} {}: {:.2f} t/s, plain {:.2f} t/s (x{:.2f}), {} of {} drafted tokens accepted", b.ub,
                    r.test, r.avg_ts, r.plain_ts, r.plain_ts > 0 ? r.avg_ts / r.plain_ts : 0.0, r.draft_n_accepted,
                    r.draft_n));
  r.bytes_per_token = bytes_per_token(b.model);
  return r;
}

// "tgN json-schema" / "tgN grammar": see BenchParams::grammar_file.
BenchRow bench_constrained(UbBench& b, int32_t ng) {
  const bool is_schema = !b.p.json_schema_file.empty();
  const std::string& path = is_schema ? b.p.json_schema_file : b.p.grammar_file;
  BenchRow r = b.base;
  r.n_gen = ng;
  r.constraint = path;
  r.test = fmt::format("tg{} {}", ng, is_schema ? "json-schema" : "grammar");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("bench: cannot read {}", path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const tok::Tokenizer tok = tok::Tokenizer::from_gguf(b.model.file());
  nlohmann::json schema;
  if (is_schema) {
    try {
      schema = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
      fail("bench: {}: not JSON: {}", path, e.what());
    }
  }
  auto compile = [&] {
    try {
      return is_schema ? grammar::compile_json_schema(schema, tok) : grammar::compile_gbnf(text, tok);
    } catch (const std::exception& e) {
      fail("bench: {}: {}", path, e.what());
    }
  };
  const std::vector<int32_t> prompt(b.tokens.begin(), b.tokens.begin() + k_spec_prompt / 2);
  SessionSource src(b.s);
  Generator gen(src, tok);
  GenerateParams g;
  g.sampling.temp = 0.8f;
  g.sampling.n_vocab = static_cast<int32_t>(std::min<size_t>(tok.vocab().size(), size_t(b.model.hparams().n_vocab)));
  auto run_pair = [&](uint64_t seed) {
    GenerateParams gc = g;
    gc.sampling.seed = seed;
    gc.max_tokens = ng;
    gc.grammar = compile();
    b.s.reset();
    const GenerateResult c = gen.generate(prompt, gc);
    GenerateParams gp = g;
    gp.sampling.seed = seed;
    gp.max_tokens = std::max<int64_t>(int64_t(c.tokens.size()), 1);
    gp.ignore_eos = true;
    b.s.reset();
    const GenerateResult u = gen.generate(prompt, gp);
    return std::pair{c, u};
  };
  if (b.p.warmup) {
    b.log(fmt::format("bench: ub {} {} warm-up", b.ub, r.test));
    run_pair(0);
  }
  std::vector<double> ns;
  double plain_ms = 0, grammar_ms = 0;
  int64_t plain_n = 0;
  for (int32_t i = 0; i < b.p.reps; ++i) {
    b.log(fmt::format("bench: ub {} {} rep {}/{}", b.ub, r.test, i + 1, b.p.reps));
    const auto [c, u] = run_pair(static_cast<uint64_t>(i + 1));
    const auto n = static_cast<int64_t>(c.tokens.size());
    if (n < 2) fail("bench: {}: the constrained run ended after {} token(s); nothing to time", path, n);
    // Per token over the same count: gen_ms runs from the first sample to the end.
    ns.push_back(c.gen_ms * 1e6 * double(ng) / double(n));
    r.constrained_tokens += n;
    grammar_ms += c.grammar_ms;
    plain_ms += u.gen_ms;
    plain_n += static_cast<int64_t>(u.tokens.size());
  }
  stats(r, ns, ng);
  r.plain_ts = plain_ms > 0 ? double(plain_n) / (plain_ms / 1e3) : 0.0;
  r.grammar_ms_per_token = r.constrained_tokens > 0 ? grammar_ms / double(r.constrained_tokens) : 0.0;
  b.log(
      fmt::format("bench: ub {} {}: {:.2f} t/s, unconstrained {:.2f} t/s ({:+.1f} % per token), grammar {:.3f} ms "
                  "per token, {} tokens",
                  b.ub, r.test, r.avg_ts, r.plain_ts, r.avg_ts > 0 ? 100.0 * (r.plain_ts / r.avg_ts - 1) : 0.0,
                  r.grammar_ms_per_token, r.constrained_tokens));
  r.bytes_per_token = bytes_per_token(b.model);
  return r;
}

void check_params(const BenchParams& p) {
  if (!p.grammar_file.empty() && !p.json_schema_file.empty())
    fail("bench: give one of --grammar-file and --json-schema-file, not both");
  if (p.reps < 1) fail("bench: -r must be ≥ 1 (got {})", p.reps);
  for (int32_t v : p.n_prompt)
    if (v < 0) fail("bench: -p must be ≥ 0 (got {})", v);
  for (int32_t v : p.n_gen)
    if (v < 0) fail("bench: -n must be ≥ 0 (got {})", v);
  for (int32_t v : p.n_ubatch)
    if (v < 1) fail("bench: -ub must be ≥ 1 (got {})", v);
  for (int32_t v : p.n_depth)
    if (v < 0) fail("bench: -d must be ≥ 0 (got {})", v);
  if (p.n_depth.empty()) fail("bench: -d needs at least one depth");
}

}  // namespace

std::vector<BenchRow> run_bench(const BenchParams& p, const std::function<void(const std::string&)>& log) {
  check_params(p);
  auto model = model::Model::load(p.model);
  const auto& hp = model->hparams();
  uint64_t size = 0, n_params = 0;
  for (const auto& t : model->file().tensors()) {
    size += t.n_bytes;
    n_params += t.n_elements;
  }
  const int32_t max_p = p.n_prompt.empty() ? 0 : *std::max_element(p.n_prompt.begin(), p.n_prompt.end());
  const int32_t max_n = p.n_gen.empty() ? 0 : *std::max_element(p.n_gen.begin(), p.n_gen.end());
  const int32_t max_d = *std::max_element(p.n_depth.begin(), p.n_depth.end());
  int32_t n_ctx = std::max({max_p, max_n, 1}) + max_d;
  if (!p.spec.empty()) n_ctx = std::max(n_ctx, k_spec_prompt + max_n + p.draft_max + 1);
  if (!p.grammar_file.empty() || !p.json_schema_file.empty()) n_ctx = std::max(n_ctx, k_spec_prompt / 2 + max_n + 1);
  if (p.n_ctx > 0 && p.n_ctx < n_ctx)
    fail("bench: -c {} is shorter than the {} positions the longest test needs (-p/-n/-d)", p.n_ctx, n_ctx);
  if (p.n_ctx > 0) n_ctx = p.n_ctx;
  vulkan::ops::parse_matmul_path(p.matmul, "--matmul");  // a usage error before the model loads

  // Seeded random tokens (llama-bench uses random tokens too); id 0 avoided.
  std::mt19937_64 rng(p.seed);
  std::uniform_int_distribution<int32_t> dist(1, std::max(1, hp.n_vocab - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(std::max({max_p, max_n, k_spec_prompt})));
  for (auto& t : tokens) t = dist(rng);
  std::vector<int32_t> depth_tokens(static_cast<size_t>(max_d));  // what the KV holds before a timed run
  for (auto& t : depth_tokens) t = dist(rng);

  std::vector<BenchRow> rows;
  for (int32_t ub : p.n_ubatch) {
    SessionOptions so;
    so.n_ctx = n_ctx;
    so.n_ubatch = ub;
    so.swa_full = p.swa_full;
    BackendOptions bo;
    bo.device = p.device;
    bo.matmul = p.matmul;
    bo.profile = p.profile;
    bo.kv_f16 = p.kv_f16;
    bo.env = p.env;
    if (p.profile) bo.vulkan_for = "bench --profile";
    std::shared_ptr<backend::Backend> be = make_backend(bo);
    // --kv-budget before the session allocates its KV (the CPU keeps f32).
    const backend::KvType kvt = be->stats().kind != "cpu" && p.kv_f16 ? backend::KvType::F16 : backend::KvType::F32;
    KvBytes kv_pt;
    const int32_t n_ring = model->swa_ring(n_ctx, ub, p.swa_full);
    const KvBytes kv_all = kv_bytes(*model, n_ctx, 1, kvt, &kv_pt, n_ring);
    check_kv_budget(kv_all, p.kv_budget_mib, fmt::format("a context of {} positions", n_ctx));
    Session s(*model, be, so);
    BenchRow base;
    base.model = model_label(*model, n_params);
    base.model_file = p.model;
    base.model_size = size;
    base.model_n_params = n_params;
    base.backend = s.backend().name();
    base.n_ubatch = ub;
    base.reps = p.reps;
    base.matmul_path = s.context().stats().matmul_path;
    base.tiles = s.backend().stats().tiles;  // the tuning profile and its tiles
    if (!base.tiles.empty()) log(fmt::format("bench: ub {} tiles: {}", ub, base.tiles));
    base.type_k = base.type_v = s.context().kv_type() == backend::KvType::F16 ? "f16" : "f32";
    base.kv_bytes = kv_all;
    base.kv_per_token = kv_pt;
    base.n_ctx = n_ctx;
    base.swa_cells = n_ring > 0 ? n_ring : n_ctx;
    base.build_commit = build_commit();
    base.driver = backend_driver(s.backend());
    base.tune_profile = base.tiles.substr(0, base.tiles.find(": "));
    base.overrides = overrides_in_effect(p.env);
    UbBench b{p, *model, s, tokens, depth_tokens, ub, std::move(base), log};
    std::vector<BenchRow> ub_rows;
    for (int32_t depth : p.n_depth)
      for (int32_t np : p.n_prompt)
        if (np != 0) ub_rows.push_back(bench_pp(b, depth, np));
    for (int32_t depth : p.n_depth)
      for (int32_t ng : p.n_gen)
        if (ng != 0) ub_rows.push_back(bench_tg(b, depth, ng));
    // Parallel decode: npl sequences in one context, one token of each per step.
    for (int32_t npl : p.n_pl)
      for (int32_t ng : p.n_gen)
        if (ng != 0 && npl >= 1) ub_rows.push_back(bench_npl(b, npl, ng));
    for (const std::string& sp : p.spec)
      for (int32_t ng : p.n_gen)
        if (ng != 0) ub_rows.push_back(bench_spec(b, ng, sp));
    if (!p.grammar_file.empty() || !p.json_schema_file.empty())
      for (int32_t ng : p.n_gen)
        if (ng != 0) ub_rows.push_back(bench_constrained(b, ng));
    const uint64_t peak = s.backend().device_memory_bytes();
    const backend::MemoryStats mem = s.backend().stats().memory;
    for (auto& r : ub_rows) {
      r.peak_device_memory = peak;
      r.memory = mem;
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

std::string bench_markdown(const std::vector<BenchRow>& rows) {
  std::string out =
      "| model | size | params | backend | n_ubatch | test | t/s | peak mem | TFLOP/s | GB/s | % roof |\n"
      "| ------------------------------ | ---------: | ---------: | ---------- | -------: | ------------: | "
      "-------------------: | ---------: | ------: | ------: | ------: |\n";
  for (const auto& r : rows) {
    std::string roof = r.roof_kind.empty() ? "-" : fmt::format("{:.1f} {}", r.roof_pct, r.roof_kind);
    const std::string tf = r.tflops >= 0.01 ? fmt::format("{:.2f}", r.tflops) : fmt::format("{:.2g}", r.tflops);
    // tg rows: weight bytes read per second (not for speculative rows: a step reads them once for several tokens)
    const std::string gbs = r.n_gen > 0 && r.spec.empty() && r.constraint.empty() ? fmt::format("{:.1f}", r.gbs) : "-";
    // params as llama-bench prints them: M below a billion, B from there.
    const double np = double(r.model_n_params);
    const std::string params = np < 1e9 ? fmt::format("{:.2f} M", np / 1e6) : fmt::format("{:.2f} B", np / 1e9);
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {:.2f} ± {:.2f} | {} | {} | {} | {} |\n", r.model,
                       human_bytes(r.model_size), params, r.backend, r.n_ubatch, r.test, r.avg_ts, r.stddev_ts,
                       human_bytes(r.peak_device_memory), tf, gbs, roof);
  }
  bool head = false;
  for (const auto& r : rows) {
    if (r.spec.empty()) continue;
    if (!head) out += "\n| test | acceptance | drafted | t/s plain | speed-up |\n| --- | ---: | ---: | ---: | ---: |\n";
    head = true;
    out += fmt::format("| {} | {:.1f} % | {} | {:.2f} | {:.2f}x |\n", r.test,
                       r.draft_n > 0 ? 100.0 * double(r.draft_n_accepted) / double(r.draft_n) : 0.0, r.draft_n,
                       r.plain_ts, r.plain_ts > 0 ? r.avg_ts / r.plain_ts : 0.0);
  }
  head = false;
  for (const auto& r : rows) {
    if (r.constraint.empty()) continue;
    if (!head)
      out +=
          "\n| test | constraint | t/s unconstrained | cost per token | grammar ms/token | tokens |\n"
          "| --- | --- | ---: | ---: | ---: | ---: |\n";
    head = true;
    out += fmt::format("| {} | {} | {:.2f} | {:+.1f} % | {:.3f} | {} |\n", r.test, r.constraint, r.plain_ts,
                       r.avg_ts > 0 ? 100.0 * (r.plain_ts / r.avg_ts - 1) : 0.0, r.grammar_ms_per_token,
                       r.constrained_tokens);
  }
  return out;
}

std::string bench_csv(const std::vector<BenchRow>& rows) {
  auto q = [](const std::string& s) {
    std::string o = "\"";
    for (char c : s) {
      if (c == '"') o += '"';
      o += c;
    }
    return o + "\"";
  };
  std::string out =
      "model,model_file,model_size,model_n_params,backend,n_ubatch,n_prompt,n_gen,test,reps,avg_ts,stddev_ts,avg_ns,"
      "peak_device_memory,flops_per_token,tflops,bytes_per_token,gbs,roof_kind,roof_pct,matmul_path\n";
  for (const auto& r : rows) {
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{:.6f},{:.6f},{:.0f},{},{:.6g},{:.6f},{},{:.6f},{},{:.4f},{}\n",
                       q(r.model), q(r.model_file), r.model_size, r.model_n_params, q(r.backend), r.n_ubatch,
                       r.n_prompt, r.n_gen, r.test, r.reps, r.avg_ts, r.stddev_ts, r.avg_ns, r.peak_device_memory,
                       r.flops_per_token, r.tflops, r.bytes_per_token, r.gbs, r.roof_kind, r.roof_pct, r.matmul_path);
  }
  return out;
}

nlohmann::json bench_json(const std::vector<BenchRow>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : rows) a.push_back(row_json(r));
  return a;
}

}  // namespace rocky::runtime
