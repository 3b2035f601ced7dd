// Environment reader and parsers (see options.hpp).
#include "runtime/options.hpp"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "core/error.hpp"
#include "tune/tile.hpp"

namespace rocky::runtime {

namespace {

std::string var(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

bool inline_json(const std::string& v) {
  const size_t i = v.find_first_not_of(" \t\r\n");
  return i != std::string::npos && v[i] == '{';
}

bool parse_flag(const std::string& key, const std::string& v) {
  if (v != "0" && v != "1") fail("ROCKY_SWITCH: {}={}: expected 0 or 1", key, v);
  return v == "1";
}

}  // namespace

void parse_tune(const std::string& value, vulkan::LabOptions& lab) {
  lab.tune = nullptr;
  lab.tune_source.clear();
  if (value.empty()) return;
  std::string text = value;
  std::string source = "ROCKY_TUNE";
  if (!inline_json(value)) {
    source = "ROCKY_TUNE " + value;
    std::ifstream f(value);
    if (!f) fail("{}: cannot open the tuning profile", source);
    text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON ({})", source, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object (a tuning profile or a fragment of one)", source);
  (void)tune::apply_profile_json(j, tune::builtin_profile("generic"), source);  // unknown fields, ranges
  lab.tune = std::move(j);
  lab.tune_source = source;
}

void parse_switches(const std::string& value, vulkan::LabOptions& lab) {
  if (value.empty()) return;
  std::set<std::string> seen;
  size_t at = 0;
  while (at <= value.size()) {
    const size_t comma = value.find(',', at);
    const std::string item = value.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? value.size() + 1 : comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      fail(
          "ROCKY_SWITCH='{}': '{}' is not key=value (keys: matmul, attn, fuse_epilogue, decode_replay, "
          "fuse_decode, fold_norm)",
          value, item);
    const std::string key = item.substr(0, eq), v = item.substr(eq + 1);
    if (!seen.insert(key).second) fail("ROCKY_SWITCH='{}': {} given twice", value, key);
    if (key == "matmul") {
      if (v == "auto")
        lab.matmul = vulkan::MatmulPath::AUTO;
      else if (v == "mmq")
        lab.matmul = vulkan::MatmulPath::MMQ;
      else if (v == "mm")
        lab.matmul = vulkan::MatmulPath::MM;
      else if (v == "basic")
        lab.matmul = vulkan::MatmulPath::BASIC;
      else
        fail("ROCKY_SWITCH: matmul={}: expected auto, mmq, mm or basic", v);
    } else if (key == "attn") {
      if (v == "auto")
        lab.attn = vulkan::AttnKernel::AUTO;
      else if (v == "flash")
        lab.attn = vulkan::AttnKernel::FLASH;
      else if (v == "simple")
        lab.attn = vulkan::AttnKernel::SIMPLE;
      else if (v == "decode")
        lab.attn = vulkan::AttnKernel::DECODE;
      else
        fail("ROCKY_SWITCH: attn={}: expected auto, flash, simple or decode", v);
    } else if (key == "fuse_epilogue") {
      lab.fuse_epilogue = parse_flag(key, v);
    } else if (key == "decode_replay") {
      lab.decode_replay = parse_flag(key, v);
    } else if (key == "fuse_decode") {
      lab.fuse_decode = parse_flag(key, v);
    } else if (key == "fold_norm") {
      lab.fold_norm = parse_flag(key, v);
    } else {
      fail("ROCKY_SWITCH: unknown switch '{}' (matmul, attn, fuse_epilogue, decode_replay, fuse_decode, fold_norm)",
           key);
    }
  }
}

uint64_t parse_device_memory_limit(const std::string& value) {
  const char* s = value.c_str();
  if (*s == '\0') return 0;
  // strtoull accepts a sign ("-5" wraps to ~2^64, i.e. no limit) and saturates on overflow: digits only.
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (*s < '0' || *s > '9' || end == s || *end != '\0' || errno == ERANGE)
    fail("ROCKY_DEVICE_MEMORY_LIMIT='{}' is not a byte count", s);
  return v;
}

uint64_t parse_timeout_s(const std::string& value) {
  if (value.empty()) return 1800;
  const char* s = value.c_str();
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (*s < '0' || *s > '9' || end == s || *end != '\0' || errno == ERANGE || v == 0)
    fail("ROCKY_VULKAN_TIMEOUT_S='{}': expected a positive count of seconds", value);
  return v;
}

fault::Plan parse_fault(const std::string& value) {
  fault::Plan plan;
  if (value.empty()) return plan;
  static constexpr fault::Kind k_all[] = {fault::Kind::Alloc, fault::Kind::Lost, fault::Kind::Disk, fault::Kind::Kill};
  size_t at = 0;
  while (at <= value.size()) {
    const size_t comma = value.find(',', at);
    const std::string item = value.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? value.size() + 1 : comma + 1;
    const size_t sep = item.find_first_of("@%");
    if (sep == std::string::npos)
      fail("ROCKY_FAULT='{}': '{}' is not KIND@N or KIND%N (kinds: alloc, lost, disk, kill)", value, item);
    fault::Rule r;
    r.every = item[sep] == '%';
    const std::string kind = item.substr(0, sep), n = item.substr(sep + 1);
    bool known = false;
    for (const fault::Kind k : k_all)
      if (kind == fault::kind_name(k)) {
        r.kind = k;
        known = true;
      }
    if (!known) fail("ROCKY_FAULT='{}': unknown fault kind '{}' (alloc, lost, disk, kill)", value, kind);
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(n.c_str(), &end, 10);
    if (n.empty() || n[0] < '0' || n[0] > '9' || *end != '\0' || errno == ERANGE || v == 0)
      fail("ROCKY_FAULT='{}': '{}': N must be a positive count (the Nth event is the one that fails)", value, item);
    r.n = v;
    plan.rules.push_back(r);
  }
  return plan;
}

vulkan::LabOptions parse_lab(const std::string& tune, const std::string& switches) {
  vulkan::LabOptions lab;
  parse_tune(tune, lab);
  parse_switches(switches, lab);
  return lab;
}

namespace {
// The lab variables ROCKY_TUNE and ROCKY_SWITCH replaced: set, they are an error saying what to use
// (a lab script of before would otherwise run with its setting silently ignored).
constexpr std::pair<const char*, const char*> k_retired[] = {
    {"ROCKY_MATMUL", "ROCKY_SWITCH=matmul=…"},
    {"ROCKY_MATMUL_TILE", R"(ROCKY_TUNE='{"matmul": {"bm": …, "bn": …, "bk": …, "tm": …, "tn": …}}')"},
    {"ROCKY_ATTN", "ROCKY_SWITCH=attn=…"},
    {"ROCKY_ATTN_TILE", R"(ROCKY_TUNE='{"attn_tile": {"wg": …, "br": …, "tr": …, "tc": …, …}}')"},
    {"ROCKY_ATTN_SPLIT", R"(ROCKY_TUNE='{"attn_rule": {"split_chunk": N}}' (0: {"split": 0}))"},
    {"ROCKY_ATTN_FA_GRID", R"(ROCKY_TUNE='{"attn_rule": {"fa_groups": WORKGROUPS}}')"},
    {"ROCKY_FUSE_EPILOGUE", "ROCKY_SWITCH=fuse_epilogue=0|1"},
    {"ROCKY_MMV_SHAPE", R"(ROCKY_TUNE='{"mmv": {"wg": …, "rows": …, "min_groups": 0, "wg_by_k": 0}}')"},
    {"ROCKY_DECODE_REPLAY", "ROCKY_SWITCH=decode_replay=0|1"},
    {"ROCKY_FUSE_DECODE", "ROCKY_SWITCH=fuse_decode=0|1"},
    {"ROCKY_FOLD_NORM", "ROCKY_SWITCH=fold_norm=0|1"},
    {"ROCKY_DELTA_CHUNK", R"(ROCKY_TUNE='{"delta_chunk": N}')"},
    {"ROCKY_MMV_COLS", R"(ROCKY_TUNE='{"mmv": {"cols": N}}')"},
    {"ROCKY_MMV_COL_SPLIT", R"(ROCKY_TUNE='{"mmv": {"col_split": N}}')"},
    {"ROCKY_MMV_Q8", R"(ROCKY_TUNE='{"mmv": {"q8": N}}')"},
    {"ROCKY_MMV_COLS_SHAPE", R"(ROCKY_TUNE='{"mmv": {"cols_wg": WG, "cols_rows": ROWS}}')"},
};
}  // namespace

EnvOptions read_env() {
  for (const auto& [name, use] : k_retired)
    if (!var(name).empty()) fail("{} is no longer read: use {} (README: environment variables)", name, use);
  EnvOptions e;
  auto rocky_var = [&](const char* name) {  // a ROCKY_* variable, remembered as set when it is
    std::string v = var(name);
    if (!v.empty()) e.set.emplace(name, v);
    return v;
  };
  parse_tune(rocky_var("ROCKY_TUNE"), e.lab);
  parse_switches(rocky_var("ROCKY_SWITCH"), e.lab);
  e.lab.pipeline_stats = rocky_var("ROCKY_PIPELINE_STATS");
  e.lab.device_memory_limit = parse_device_memory_limit(rocky_var("ROCKY_DEVICE_MEMORY_LIMIT"));
  e.lab.vulkan_timeout_s = parse_timeout_s(rocky_var("ROCKY_VULKAN_TIMEOUT_S"));
  e.vulkan_loader = rocky_var("ROCKY_VULKAN_LOADER");
  e.fault = parse_fault(rocky_var("ROCKY_FAULT"));
  if (const std::string x = var("XDG_CACHE_HOME"); !x.empty()) {
    e.cache_dir = x;
  } else if (const std::string h = var("HOME"); !h.empty()) {
    e.cache_dir = (std::filesystem::path(h) / ".cache").string();
  }
  e.xdg_runtime_dir = var("XDG_RUNTIME_DIR");
  return e;
}

std::map<std::string, std::string> overrides_in_effect(const EnvOptions& e) { return e.set; }

void apply_env(const EnvOptions& e, vulkan::VulkanOptions& o) {
  o.lab = e.lab;
  o.cache_dir = e.cache_dir;
  o.loader = e.vulkan_loader;
  o.xdg_runtime_dir = e.xdg_runtime_dir;
  o.no_profile = e.no_profile;
}

vulkan::InstanceOptions instance_options(const EnvOptions& e) {
  vulkan::InstanceOptions io;
  io.loader = e.vulkan_loader;
  io.xdg_runtime_dir = e.xdg_runtime_dir;
  return io;
}

uint64_t device_memory_limit_from_env() { return parse_device_memory_limit(var("ROCKY_DEVICE_MEMORY_LIMIT")); }

}  // namespace rocky::runtime
