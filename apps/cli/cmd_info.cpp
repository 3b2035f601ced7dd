// rocky info MODEL.gguf [--json] — metadata, tensor table, totals and an architecture summary.
//
// Text output: the file line, metadata (arrays longer than 8 elements show the first 8 and a
// count), the tensor table (name, type, shape in GGUF order ne0 first, bytes, absolute file offset),
// totals (parameters, bytes, bits per weight, per type) and the architecture summary.
// --json prints one object:
//   {"file", "gguf_version", "file_size", "alignment", "data_offset",
//    "metadata": {key: value}   scalars as JSON values; arrays of ≤ 64 elements as JSON arrays;
//                               longer ones as {"elem_type", "count", "first": [first 8]}
//    "tensors": [{"name", "type", "shape": [ne0, ...], "n_elements", "bytes", "offset"}],
//    "totals": {"n_tensors", "n_params", "n_bytes", "bits_per_weight", "by_type": {type: {"tensors", "params"}}},
//    "architecture": {"arch", "n_layer", "n_embd", "n_head", "n_head_kv", "head_dim", "n_ff", "n_vocab",
//                     "rope_type", "rope_base", "rope_dim", "n_ctx_train",   (null when unknown)
//                     "rocky_runs": bool, "features": the architecture's special features (q/k norm,
//                     rope scaling, bias, tied output, …) or null, "refused": the loader's error or null}}
// Strings that are not valid UTF-8 are printed with U+FFFD replacements in JSON.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gguf/gguf.hpp"
#include "gguf/summary.hpp"
#include "model/arch/arch.hpp"
#include "model/model.hpp"

namespace rocky::cli {
namespace {

using nlohmann::json;

struct InfoOpts {
  std::string model;
  std::string model_opt;
  bool json = false;
};

constexpr uint64_t k_json_full_array = 64;
constexpr size_t k_text_array_elems = 8;

json scalar_json(gguf::ValueType t, const uint8_t* p) {
  using gguf::load_le;
  using VT = gguf::ValueType;
  switch (t) {
    case VT::U8: return p[0];
    case VT::I8: return static_cast<int8_t>(p[0]);
    case VT::BOOL: return p[0] != 0;
    case VT::U16: return load_le<uint16_t>(p);
    case VT::I16: return load_le<int16_t>(p);
    case VT::U32: return load_le<uint32_t>(p);
    case VT::I32: return load_le<int32_t>(p);
    case VT::F32: return load_le<float>(p);
    case VT::U64: return load_le<uint64_t>(p);
    case VT::I64: return load_le<int64_t>(p);
    case VT::F64: return load_le<double>(p);
    default: return nullptr;
  }
}

uint64_t elem_size(gguf::ValueType t) {
  using VT = gguf::ValueType;
  switch (t) {
    case VT::U8:
    case VT::I8:
    case VT::BOOL: return 1;
    case VT::U16:
    case VT::I16: return 2;
    case VT::U32:
    case VT::I32:
    case VT::F32: return 4;
    case VT::U64:
    case VT::I64:
    case VT::F64: return 8;
    default: return 0;
  }
}

json value_json(const gguf::Value& v) {
  using VT = gguf::ValueType;
  switch (v.type) {
    case VT::STRING: return std::string(v.str);
    case VT::BOOL: return v.u != 0;
    case VT::F32: return static_cast<float>(v.f);
    case VT::F64: return v.f;
    case VT::U8:
    case VT::U16:
    case VT::U32:
    case VT::U64: return v.u;
    case VT::I8:
    case VT::I16:
    case VT::I32:
    case VT::I64: return v.i;
    case VT::ARRAY: {
      uint64_t shown = v.count <= k_json_full_array ? v.count : 8;
      json elems = json::array();
      for (uint64_t k = 0; k < shown; ++k) {
        uint64_t es = elem_size(v.elem_type);
        if (es)
          elems.push_back(scalar_json(v.elem_type, v.raw + k * es));
        else if (v.elem_type == VT::STRING)
          elems.push_back(std::string(v.strings[k]));
        else
          elems.push_back(value_json(v.items[k]));
      }
      if (shown == v.count) return elems;
      return json{{"elem_type", std::string(gguf::value_type_name(v.elem_type))}, {"count", v.count}, {"first", elems}};
    }
  }
  return nullptr;
}

template <typename T>
json opt_json(const std::optional<T>& o) {
  return o ? json(*o) : json(nullptr);
}

std::string shape_text(const gguf::TensorInfo& t) {
  std::string s;
  for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? " × " : "") + std::to_string(t.ne[d]);
  return s;
}

// What rocky makes of the file as a model: the architecture's special features when it loads,
// else the loader's error (a vocab-only file, an unsupported architecture, a refused key, …).
struct Runnable {
  bool ok = false;
  std::string features;  // arch::special_features
  std::string error;
};
Runnable check_runnable(const std::string& path) {
  Runnable r;
  try {
    auto m = model::Model::load(path);
    r.features = model::arch::special_features(m->hparams(), m->weights());
    r.ok = true;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

template <typename T>
std::string opt_text(const std::optional<T>& o) {
  return o ? fmt::format("{}", *o) : std::string("?");
}

int run_info(const InfoOpts& o) {
  const std::string& path = o.model.empty() ? o.model_opt : o.model;
  auto f = gguf::GgufFile::open(path);
  const gguf::Totals tot = gguf::totals(f);
  const gguf::ArchSummary a = gguf::arch_summary(f);
  const Runnable rn = check_runnable(path);

  if (o.json) {
    json j;
    j["file"] = f.path();
    j["gguf_version"] = f.version();
    j["file_size"] = f.file_size();
    j["alignment"] = f.alignment();
    j["data_offset"] = f.data_offset();
    json md = json::object();
    for (const auto& [key, value] : f.metadata()) md[std::string(key)] = value_json(value);
    j["metadata"] = std::move(md);
    json ts = json::array();
    for (const auto& t : f.tensors()) {
      json shape = json::array();
      for (uint32_t d = 0; d < t.n_dims; ++d) shape.push_back(t.ne[d]);
      ts.push_back({{"name", t.name},
                    {"type", std::string(dtype_name(t.type))},
                    {"shape", shape},
                    {"n_elements", t.n_elements},
                    {"bytes", t.n_bytes},
                    {"offset", t.file_offset(f.data_offset())}});
    }
    j["tensors"] = std::move(ts);
    json by = json::object();
    for (const auto& [type, n] : tot.tensors_by_type)
      by[type] = {{"tensors", n}, {"params", tot.params_by_type.at(type)}};
    j["totals"] = {{"n_tensors", tot.n_tensors},
                   {"n_params", tot.n_params},
                   {"n_bytes", tot.n_bytes},
                   {"bits_per_weight", tot.bits_per_weight},
                   {"by_type", by}};
    j["architecture"] = {{"arch", a.arch},
                         {"n_layer", opt_json(a.n_layer)},
                         {"n_embd", opt_json(a.n_embd)},
                         {"n_head", opt_json(a.n_head)},
                         {"n_head_kv", opt_json(a.n_head_kv)},
                         {"head_dim", opt_json(a.head_dim)},
                         {"n_ff", opt_json(a.n_ff)},
                         {"n_vocab", opt_json(a.n_vocab)},
                         {"rope_type", a.rope_type},
                         {"rope_base", opt_json(a.rope_base)},
                         {"rope_dim", opt_json(a.rope_dim)},
                         {"n_ctx_train", opt_json(a.n_ctx_train)},
                         {"rocky_runs", rn.ok},
                         {"features", rn.ok ? json(rn.features) : json(nullptr)},
                         {"refused", rn.ok ? json(nullptr) : json(rn.error)}};
    fmt::print("{}\n", j.dump(2, ' ', false, json::error_handler_t::replace));
    return 0;
  }

  fmt::print("file: {}\n", f.path());
  fmt::print("GGUF version {}, {} bytes, alignment {}, data section at {:#x}\n\n", f.version(),
             gguf::group_digits(f.file_size()), f.alignment(), f.data_offset());
  size_t key_w = 0;
  for (const auto& kv : f.metadata()) key_w = std::max(key_w, kv.first.size());
  fmt::print("metadata ({} keys):\n", f.metadata().size());
  for (const auto& [key, value] : f.metadata()) {
    std::string type = value.type == gguf::ValueType::ARRAY ? "array" : std::string(gguf::value_type_name(value.type));
    fmt::print("  {:<{}}  {:<6}  {}\n", gguf::quote(key).substr(1, gguf::quote(key).size() - 2), key_w, type,
               gguf::format_value(value, k_text_array_elems));
  }
  size_t name_w = 4;
  for (const auto& t : f.tensors()) name_w = std::max(name_w, t.name.size());
  fmt::print("\ntensors ({}):\n", f.tensors().size());
  if (!f.tensors().empty()) {
    fmt::print("  {:<{}}  {:<7}  {:<24}  {:>14}  {:>12}\n", "name", name_w, "type", "shape", "bytes", "offset");
    for (const auto& t : f.tensors()) {
      fmt::print("  {:<{}}  {:<7}  {:<24}  {:>14}  {:>#12x}\n", t.name, name_w, dtype_name(t.type), shape_text(t),
                 gguf::group_digits(t.n_bytes), t.file_offset(f.data_offset()));
    }
  }
  fmt::print("\ntotals: {} parameters, {} bytes of tensor data, {:.2f} bits per weight\n",
             gguf::group_digits(tot.n_params), gguf::group_digits(tot.n_bytes), tot.bits_per_weight);
  for (const auto& [type, n] : tot.tensors_by_type)
    fmt::print("  {:<7} {:>4} tensors  {:>14} parameters\n", type, n, gguf::group_digits(tot.params_by_type.at(type)));
  fmt::print("\narchitecture: {}\n", a.arch.empty() ? "?" : a.arch);
  fmt::print("  n_layer {}, n_embd {}, n_head {}, n_head_kv {}, head_dim {}, n_ff {}, n_vocab {}\n",
             opt_text(a.n_layer), opt_text(a.n_embd), opt_text(a.n_head), opt_text(a.n_head_kv), opt_text(a.head_dim),
             opt_text(a.n_ff), opt_text(a.n_vocab));
  fmt::print("  rope {} (base {}, dims {}), n_ctx_train {}\n", a.rope_type, opt_text(a.rope_base), opt_text(a.rope_dim),
             opt_text(a.n_ctx_train));
  if (rn.ok) {
    fmt::print("  features: {}\n", rn.features);
  } else {
    fmt::print("  rocky cannot run it: {}\n", rn.error);
  }
  return 0;
}

}  // namespace

void add_info(CLI::App& app, Runner& run) {
  auto o = std::make_shared<InfoOpts>();
  auto* sub = app.add_subcommand("info", "Show a GGUF file's metadata, tensors, totals and architecture");
  auto* pos = sub->add_option("model", o->model, "GGUF file");
  auto* opt = sub->add_option("-m,--model", o->model_opt, "GGUF file (instead of the positional argument)");
  pos->excludes(opt);
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->callback([&run, o] {
    if (o->model.empty() && o->model_opt.empty()) throw CLI::RequiredError("MODEL.gguf (positional or -m)");
    run = [o] { return run_info(*o); };
  });
}

}  // namespace rocky::cli
