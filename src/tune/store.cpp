#include "tune/store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/error.hpp"

namespace rocky::tune {

namespace fs = std::filesystem;

std::string profiles_dir(const std::string& cache_dir) {
  if (cache_dir.empty()) return {};
  return (fs::path(cache_dir) / "rocky" / "profiles").string();
}

std::string profile_file_name(const DeviceKey& k) {
  return fmt::format("{:04x}-{:04x}-{:08x}.json", k.vendor_id, k.device_id, k.driver_version);
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail("{}: cannot open the tuning profile", path);
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON ({})", path, e.what());
  }
}

StoredKey stored_key(const nlohmann::json& j) {
  StoredKey s;
  if (!j.is_object() || !j.contains("device") || !j["device"].is_object()) return s;
  const nlohmann::json& d = j["device"];
  auto u = [&](const char* n, uint32_t* out) {
    if (!d.contains(n) || !d[n].is_number_unsigned() || d[n].get<uint64_t>() > 0xFFFFFFFFull) return false;
    *out = d[n].get<uint32_t>();
    return true;
  };
  if (!u("vendor_id", &s.key.vendor_id) || !u("device_id", &s.key.device_id) ||
      !u("driver_version", &s.key.driver_version))
    return s;
  auto str = [&](const char* n) { return d.contains(n) && d[n].is_string() ? d[n].get<std::string>() : std::string(); };
  s.key.name = str("name");
  s.key.driver_name = str("driver_name");
  s.key.driver_info = str("driver_info");
  s.ok = true;
  return s;
}

ProfileLookup find_profile(const std::string& dir, const DeviceKey& k) {
  ProfileLookup r;
  if (dir.empty()) return r;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return r;
  const std::string mine = profile_file_name(k);
  const std::string prefix = fmt::format("{:04x}-{:04x}-", k.vendor_id, k.device_id);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    const std::string path = (fs::path(dir) / n).string();
    if (n == mine) {
      // The name is the key; a "device" inside that says otherwise (a copied file) is not used.
      try {
        const StoredKey s = stored_key(read_json_file(path));
        if (s.ok && (s.key.vendor_id != k.vendor_id || s.key.device_id != k.device_id ||
                     s.key.driver_version != k.driver_version)) {
          r.notes.push_back(
              fmt::format("ignoring tuning profile {}: its device key {:04x}-{:04x}-{:08x} is not "
                          "this device's",
                          path, s.key.vendor_id, s.key.device_id, s.key.driver_version));
          continue;
        }
      } catch (const Error&) {
        // Unreadable: load_profile_override says why when it is loaded.
      }
      r.path = path;
    } else if (n.rfind(prefix, 0) == 0 && n.size() > 5 && n.substr(n.size() - 5) == ".json") {
      r.notes.push_back(
          fmt::format("ignoring tuning profile {}: made for driver version {}, this driver is {:08x} "
                      "(run `rocky tune` again)",
                      path, n.substr(prefix.size(), n.size() - 5 - prefix.size()), k.driver_version));
    }
  }
  return r;
}

nlohmann::json key_to_json(const DeviceKey& k) {
  return {{"vendor_id", k.vendor_id}, {"device_id", k.device_id},     {"driver_version", k.driver_version},
          {"name", k.name},           {"driver_name", k.driver_name}, {"driver_info", k.driver_info}};
}

namespace {
nlohmann::json tile_json(const MatmulTile& t) {
  return {{"bm", t.bm},    {"bn", t.bn}, {"bk", t.bk}, {"wm", t.wm},           {"wn", t.wn},
          {"tm", t.tm},    {"tn", t.tn}, {"wg", t.wg}, {"bk_step", t.bk_step}, {"prefetch", t.prefetch},
          {"vec4", t.vec4}};
}
nlohmann::json flash_tile_json(const FlashTile& t) {
  return {{"wg", t.wg},   {"br", t.br}, {"tr", t.tr},    {"tc", t.tc}, {"prefetch", t.prefetch},
          {"kvh", t.kvh}, {"sg", t.sg}, {"roll", t.roll}};
}
nlohmann::json flash_json(const std::vector<FlashTile>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const FlashTile& t : v) a.push_back(flash_tile_json(t));
  return a;
}
}  // namespace

nlohmann::json profile_to_json(const DeviceProfile& p, const std::string& base_name) {
  nlohmann::json j;
  j["profile"] = base_name;
  j["modeled"] = p.modeled ? 1 : 0;
  j["max_accumulators"] = p.max_accumulators;
  j["mmq"] = tile_json(p.mmq);
  j["mmq_alt"] = nlohmann::json::array();
  for (const MatmulTile& t : p.mmq_alt) j["mmq_alt"].push_back(tile_json(t));
  j["min_workgroups"] = p.min_workgroups;
  j["mm"] = tile_json(p.mm);
  j["mmq_q4k_nibbles"] = p.mmq_q4k_nibbles ? 1 : 0;
  j["mmq_q6k_nibbles"] = p.mmq_q6k_nibbles ? 1 : 0;
  j["mmv"] = {{"wg", p.mmv.wg},       {"rows", p.mmv.rows},       {"min_groups", p.mmv.min_groups},
              {"split", p.mmv.split}, {"unroll", p.mmv.unroll},   {"wg_by_k", p.mmv.wg_by_k},
              {"q8", p.mmv.q8},       {"cols_wg", p.mmv.cols_wg}, {"cols_rows", p.mmv.cols_rows},
              {"cols", p.mmv.cols}};
  if (p.mmv.col_split != MatvecRule::k_col_split_by_cols) j["mmv"]["col_split"] = p.mmv.col_split;
  if (p.mmv.q8_group != 8) j["mmv"]["q8_group"] = p.mmv.q8_group;
  if (p.mmv.q8_wouter != 0) j["mmv"]["q8_wouter"] = p.mmv.q8_wouter;
  j["attn"] = flash_json(p.attn);
  j["attn_wide"] = flash_json(p.attn_wide);
  j["attn_split"] = flash_json(p.attn_split);
  if (p.has_attn_tile()) j["attn_tile"] = flash_tile_json(p.attn_tile);
  const AttnRule& r = p.attn_rule;
  j["attn_rule"] = {{"flash_min_tokens", r.flash_min_tokens},
                    {"decode", r.decode},
                    {"decode_tokens", r.decode_tokens},
                    {"split", r.split},
                    {"split_chunk", r.split_chunk},
                    {"fa_groups", r.fa_groups},
                    {"dim_pairs", r.dim_pairs},
                    {"vec_f32", r.vec_f32}};
  j["matmul"] = {
      {"bm", p.matmul.bm}, {"bn", p.matmul.bn}, {"bk", p.matmul.bk}, {"tm", p.matmul.tm}, {"tn", p.matmul.tn}};
  j["delta_chunk"] = p.delta_chunk;
  j["norm_q8_wg"] = p.norm_q8_wg;
  j["deny"] = nlohmann::json::array();
  for (const DenyEntry& d : p.deny) j["deny"].push_back({{"kernel", d.kernel}, {"tile", d.tile}, {"reason", d.reason}});
  return j;
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  std::error_code ec;
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  if (ec) fail("{}: cannot create the directory ({})", p.parent_path().string(), ec.message());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) fail("{}: cannot write", tmp);
    f << j.dump(2) << "\n";
    if (!f.flush()) fail("{}: write failed", tmp);
  }
  fs::rename(tmp, p, ec);
  if (ec) fail("{}: cannot rename {} to it ({})", path, tmp, ec.message());
}

std::vector<ListedProfile> list_profiles(const std::string& dir) {
  std::vector<ListedProfile> v;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return v;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".json") continue;
    ListedProfile l;
    l.path = e.path().string();
    try {
      const nlohmann::json j = read_json_file(l.path);
      const StoredKey s = stored_key(j);
      l.key = s.key;
      l.device = s.key.name;
      l.driver = s.key.driver_name + (s.key.driver_info.empty() ? "" : " " + s.key.driver_info);
      l.base = j.contains("profile") && j["profile"].is_string() ? j["profile"].get<std::string>() : "";
      l.modeled = j.contains("modeled") && j["modeled"] == 1;
      l.complete = !(j.contains("tune") && j["tune"].is_object() && j["tune"].value("complete", 1) == 0);
    } catch (const Error& err) {
      l.readable = false;
      l.error = err.what();
    }
    v.push_back(l);
  }
  std::sort(v.begin(), v.end(), [](const ListedProfile& a, const ListedProfile& b) { return a.path < b.path; });
  return v;
}

}  // namespace rocky::tune
