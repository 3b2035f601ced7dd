// rocky report [-o FILE] [--quick] [--device vulkan:N] — the board kit: one run of everything a
// board owner can attach to a bug report, on whatever device rocky finds:
//   doctor, devices, roofline, synth of the Qwen2.5-1.5B and 3B shapes, a quick tune (written
//   beside the user's profile in the profile cache, never over it), verify of both models, and
//   bench pp512 / tg128 at ub 64, 128, 512 and depth 0 and 4096
// into FILE.json and FILE.md (default rocky-report.json / rocky-report.md), with progress on stderr.
//
// Each section runs this same binary as a child process (`rocky doctor --json`, …) and keeps its
// exit code, time, output and the tail of its stderr. A section that fails — or crashes inside a
// driver, which is exactly what a first run on a new board may do — is recorded in the report and
// the next section runs; the report itself is never lost to it. --quick makes models of 2 layers
// (instead of the presets' 28 / 36), one bench repetition and a tune at 128 tokens per matmul:
// minutes on lavapipe.
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "tune/store.hpp"

namespace rocky::cli {
namespace {

struct ReportOpts {
  std::string out = "rocky-report.json";
  std::string device;  // "" = rocky's default pick
  bool quick = false;
  uint32_t layers = 0;  // 0: quick 2, else the presets'
  uint32_t vocab = 0;   // 0: the presets' (tests cut it to keep files small)
  std::string n_prompt = "512", n_gen = "128", ubatch = "64,128,512", depth = "0,4096";
  uint32_t tune_tokens = 0;  // 0: tune's default
  std::string work_dir;      // models and scratch ("": a directory beside the report)
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) fail("report: cannot find this program (/proc/self/exe: {})", ec.message());
  return p.string();
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::string tail_lines(const std::string& s, size_t n) {
  size_t pos = s.size(), seen = 0;
  while (pos > 0) {
    if (s[pos - 1] == '\n' && pos != s.size() && ++seen == n) break;
    --pos;
  }
  return s.substr(pos);
}

struct Section {
  std::string name, title;
  std::vector<std::string> args;  // rocky's arguments
  bool json_out = true;           // stdout is one JSON document
};

class Reporter {
 public:
  Reporter(std::string exe, std::string work) : exe_(std::move(exe)), work_(std::move(work)) {}

  void run(const Section& s, size_t index, size_t total) {
    std::string cmd = quote(exe_);
    for (const auto& a : s.args) cmd += " " + quote(a);
    const std::string err_file = work_ + "/" + s.name + ".stderr";
    fmt::print(stderr, "report: [{}/{}] {}: rocky", index, total, s.title);
    for (const auto& a : s.args) fmt::print(stderr, " {}", a);
    fmt::print(stderr, "\n");
    const auto t0 = std::chrono::steady_clock::now();
    std::string out;
    int rc = -1, signal = 0;
    if (FILE* p = popen((cmd + " 2>" + quote(err_file)).c_str(), "r")) {
      std::array<char, 65536> buf;
      size_t n;
      while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
      const int st = pclose(p);
      if (WIFEXITED(st)) rc = WEXITSTATUS(st);
      if (WIFSIGNALED(st)) signal = WTERMSIG(st);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string err = read_text(err_file);
    nlohmann::json j;
    j["name"] = s.name;
    j["title"] = s.title;
    j["command"] = "rocky " + [&] {
      std::string a;
      for (const auto& x : s.args) a += (a.empty() ? "" : " ") + x;
      return a;
    }();
    j["exit_code"] = rc;
    // popen's shell reports a child killed by signal N as exit code 128 + N.
    if (signal == 0 && rc > 128 && rc < 160) signal = rc - 128;
    if (signal) j["signal"] = signal;
    j["seconds"] = secs;
    j["status"] = rc == 0 ? "ok" : "failed";
    if (s.json_out) {
      auto parsed = nlohmann::json::parse(out, nullptr, false);
      if (!parsed.is_discarded())
        j["result"] = parsed;
      else if (!out.empty())
        j["stdout"] = tail_lines(out, 200);
    } else if (!out.empty()) {
      j["stdout"] = tail_lines(out, 200);
    }
    j["stderr_tail"] = tail_lines(err, 40);
    fmt::print(stderr, "report: [{}/{}] {}: {} ({:.1f} s){}\n", index, total, s.title, rc == 0 ? "ok" : "FAILED", secs,
               rc == 0  ? ""
               : signal ? fmt::format(" — killed by signal {}", signal)
                        : fmt::format(" — exit {}", rc));
    sections_.push_back(std::move(j));
  }

  const nlohmann::json& sections() const { return sections_; }

 private:
  std::string exe_, work_;
  nlohmann::json sections_ = nlohmann::json::array();
};

std::string markdown(const nlohmann::json& r) {
  std::string md = "# rocky report\n\n";
  md += fmt::format("- rocky {}; {}{}\n- host: {}\n- started {} (UTC); {:.0f} s in all\n\n",
                    r["rocky"].get<std::string>(), r["quick"].get<bool>() ? "--quick" : "full",
                    r.contains("device") ? ", --device " + r["device"].get<std::string>() : "",
                    r["host"].get<std::string>(), r["started"].get<std::string>(), r["seconds"].get<double>());
  md += "| section | status | seconds | command |\n|---|---|---:|---|\n";
  for (const auto& s : r["sections"])
    md += fmt::format("| {} | {} | {:.1f} | `{}` |\n", s["title"].get<std::string>(),
                      s["status"] == "ok" ? "ok" : fmt::format("**failed** (exit {})", s["exit_code"].get<int>()),
                      s["seconds"].get<double>(), s["command"].get<std::string>());
  for (const auto& s : r["sections"]) {
    md += fmt::format("\n## {}\n\n`{}` — {}, {:.1f} s\n\n", s["title"].get<std::string>(),
                      s["command"].get<std::string>(), s["status"].get<std::string>(), s["seconds"].get<double>());
    std::string body;
    if (s.contains("result"))
      body = s["result"].dump(1);
    else if (s.contains("stdout"))
      body = s["stdout"].get<std::string>();
    if (!body.empty()) md += "```\n" + tail_lines(body, 150) + (body.back() == '\n' ? "" : "\n") + "```\n";
    const std::string err = s["stderr_tail"].get<std::string>();
    if (!err.empty()) md += "\nstderr (last lines):\n\n```\n" + err + (err.back() == '\n' ? "" : "\n") + "```\n";
  }
  return md;
}

int run_report(const ReportOpts& o) {
  std::filesystem::path json_path(o.out);
  if (json_path.extension() != ".json") json_path += ".json";
  std::filesystem::path md_path = json_path;
  md_path.replace_extension(".md");
  const std::string work =
      o.work_dir.empty() ? json_path.string().substr(0, json_path.string().size() - 5) + ".d" : o.work_dir;
  std::error_code ec;
  std::filesystem::create_directories(work, ec);
  if (ec) fail("report: cannot create {}: {}", work, ec.message());
  // Check the outputs are writable before spending minutes.
  for (const auto& p : {json_path, md_path}) {
    std::ofstream f(p, std::ios::app);
    if (!f) fail("report: cannot write {}", p.string());
  }
  const uint32_t layers = o.layers ? o.layers : (o.quick ? 2u : 0u);
  const std::string exe = self_exe();
  std::vector<std::string> dev;
  if (!o.device.empty()) dev = {"--device", o.device};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  auto synth = [&](const std::string& preset, const std::string& path) {
    std::vector<std::string> a{"synth", "--preset", preset, "--type", "q4_k_m", "-q", "-o", path};
    if (layers) a = with(a, {"--layers", std::to_string(layers)});
    if (o.vocab) a = with(a, {"--vocab", std::to_string(o.vocab)});
    return a;
  };
  const std::string m15 = work + "/qwen2.5-1.5b-q4_k_m.gguf", m3 = work + "/qwen2.5-3b-q4_k_m.gguf";
  const std::string roofline_json = work + "/roofline.json";
  // The quick tune writes beside the user's profile (same directory, its own name), never over it.
  std::string tune_dir = tune::profiles_dir(process_env().cache_dir);
  if (tune_dir.empty()) tune_dir = work;
  std::filesystem::create_directories(tune_dir, ec);
  const std::string tune_out = tune_dir + "/report-quick-tune.json";
  std::vector<std::string> tune_args = with({"tune", "--quick", "--fresh", "-m", m3, "-o", tune_out}, dev);
  // --quick tunes the matmuls at 128 tokens (pp512's are 4× the work; on lavapipe the quick tune at
  // 512 alone took ≈ 10 minutes of 2 cores); --tune-tokens sets it either way.
  const uint32_t tune_tokens = o.tune_tokens ? o.tune_tokens : (o.quick ? 128 : 0);
  if (tune_tokens) tune_args = with(tune_args, {"--tokens", std::to_string(tune_tokens)});
  std::vector<std::string> bench_args = with(
      {"bench", "-m", m3, "-p", o.n_prompt, "-n", o.n_gen, "--ub", o.ubatch, "-d", o.depth, "-o", "json", "-q"}, dev);
  if (o.quick) bench_args = with(bench_args, {"-r", "1"});
  bench_args = with(bench_args, {"--roofline-json", roofline_json});
  const std::vector<std::string> roof = with({"roofline", "--json"}, dev);
  std::vector<Section> plan = {
      {"doctor", "doctor", {"doctor", "--json"}},
      {"devices", "devices", {"devices", "--json"}},
      {"roofline", "roofline", o.quick ? with(roof, {"--reps", "1"}) : roof},
      {"synth_1.5b", "synth Qwen2.5-1.5B shape", synth("qwen2.5-1.5b", m15), false},
      {"synth_3b", "synth Qwen2.5-3B shape", synth("qwen2.5-3b", m3), false},
      {"tune", "quick tune (Qwen2.5-3B shapes)", tune_args, false},
      {"verify_1.5b", "verify Qwen2.5-1.5B shape", with({"verify", "-m", m15, "--json"}, dev)},
      {"verify_3b", "verify Qwen2.5-3B shape", with({"verify", "-m", m3, "--json"}, dev)},
      {"bench", "bench pp/tg, ub and depth sweep (Qwen2.5-3B shape)", bench_args},
  };
  struct utsname u {};
  uname(&u);
  const auto started = std::chrono::system_clock::now();
  nlohmann::json r;
  r["rocky"] = "0.1.0";
  r["quick"] = o.quick;
  if (!o.device.empty()) r["device"] = o.device;
  r["host"] = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  r["started"] = fmt::format("{:%Y-%m-%dT%H:%M:%S}", fmt::gmtime(std::chrono::system_clock::to_time_t(started)));
  r["layers"] = layers;  // 0: the presets' own
  r["tune_profile"] = tune_out;
  Reporter rep(exe, work);
  std::filesystem::remove(roofline_json, ec);
  for (size_t i = 0; i < plan.size(); ++i) {
    // bench reads the roofline's peaks from its file; without one (roofline failed) it has no % column.
    if (plan[i].name == "bench" && !std::filesystem::exists(roofline_json)) {
      plan[i].args.resize(plan[i].args.size() - 2);
      plan[i].args.push_back("--no-roofline");
    }
    rep.run(plan[i], i + 1, plan.size());
    if (plan[i].name == "roofline" && rep.sections().back().contains("result"))
      std::ofstream(roofline_json) << rep.sections().back()["result"].dump();
  }
  r["sections"] = rep.sections();
  r["seconds"] = std::chrono::duration<double>(std::chrono::system_clock::now() - started).count();
  size_t failed = 0;
  for (const auto& s : r["sections"]) failed += s["status"] != "ok";
  r["failed_sections"] = failed;
  std::ofstream(json_path, std::ios::trunc) << r.dump(1) << "\n";
  std::ofstream(md_path, std::ios::trunc) << markdown(r);
  fmt::print(stderr, "report: {} and {} ({} of {} sections failed; models in {})\n", json_path.string(),
             md_path.string(), failed, plan.size(), work);
  return 0;
}

}  // namespace

void add_report(CLI::App& app, Runner& run) {
  auto o = std::make_shared<ReportOpts>();
  auto* sub = app.add_subcommand(
      "report",
      "Run doctor, devices, roofline, synth, a quick tune, verify and bench; write one JSON and one Markdown file");
  sub->add_option("-o,--output", o->out, "Report file: FILE.json and FILE.md beside it")->capture_default_str();
  sub->add_flag("--quick", o->quick,
                "2-layer models, one bench repetition, the tune at 128 tokens per matmul (minutes on lavapipe)");
  sub->add_option("--device", o->device, "Vulkan device for the GPU sections: vulkan[:N] (default: rocky's pick)");
  sub->add_option("--layers", o->layers, "Layers of the synth models (default: 2 with --quick, else the presets')")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--vocab", o->vocab, "Cut the synth models' vocabulary (tests: small files)")
      ->check(CLI::Range(512u, 16777216u));
  sub->add_option("-p,--n-prompt", o->n_prompt, "bench: prompt lengths")->capture_default_str();
  sub->add_option("-n,--n-gen", o->n_gen, "bench: generated tokens")->capture_default_str();
  sub->add_option("--ub,--ubatch-size", o->ubatch, "bench: ubatch sizes (-ub also works)")->capture_default_str();
  sub->add_option("-d,--n-depth", o->depth, "bench: KV depths")->capture_default_str();
  sub->add_option("--tune-tokens", o->tune_tokens,
                  "tune: tokens per prefill matmul (default: 128 with --quick, else tune's)")
      ->check(CLI::Range(1u, 65536u));
  sub->add_option("--work-dir", o->work_dir, "Where the models and logs go (default: FILE.d beside the report)");
  sub->callback([&run, o] { run = [o] { return run_report(*o); }; });
}

}  // namespace rocky::cli
