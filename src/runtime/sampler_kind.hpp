// The samplers of llama.cpp's chain by name and letter: header-only, so that the request parser
// (which links no runtime) validates the `samplers` field with the same table.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace rocky::runtime {

// The samplers of the chain, by llama.cpp's names (`samplers` field, --samplers) and letters
// (--sampling-seq): penalties e, dry d, top_n_sigma s, top_k k, typ_p y, top_p p, min_p m, xtc x,
// temperature t.
enum class SamplerKind : uint8_t { penalties, dry, top_n_sigma, top_k, typical_p, top_p, min_p, xtc, temperature };

// llama.cpp's default order (COMMON_SAMPLER_TYPE_*: "edskypmxt").
inline std::vector<SamplerKind> default_sampler_order() {
  using K = SamplerKind;
  return {K::penalties, K::dry, K::top_n_sigma, K::top_k, K::typical_p, K::top_p, K::min_p, K::xtc, K::temperature};
}

namespace sampler_kind_detail {
struct KindName {
  SamplerKind kind;
  const char* name;
  char chr;
};
inline constexpr KindName k_kinds[] = {
    {SamplerKind::penalties, "penalties", 'e'},
    {SamplerKind::dry, "dry", 'd'},
    {SamplerKind::top_n_sigma, "top_n_sigma", 's'},
    {SamplerKind::top_k, "top_k", 'k'},
    {SamplerKind::typical_p, "typ_p", 'y'},
    {SamplerKind::top_p, "top_p", 'p'},
    {SamplerKind::min_p, "min_p", 'm'},
    {SamplerKind::xtc, "xtc", 'x'},
    {SamplerKind::temperature, "temperature", 't'},
};
}  // namespace sampler_kind_detail

inline std::string_view sampler_name(SamplerKind k) {
  for (const auto& e : sampler_kind_detail::k_kinds)
    if (e.kind == k) return e.name;
  return "?";
}

// A name as llama.cpp reads it: the canonical ones (top_k, typ_p, temperature, …) and, with
// `alt_names`, the others it accepts (top-k, typical, nucleus, temp, …). nullopt: not a sampler.
inline std::optional<SamplerKind> sampler_from_name(std::string_view name, bool alt_names = true) {
  for (const auto& e : sampler_kind_detail::k_kinds)
    if (name == e.name) return e.kind;
  if (!alt_names) return std::nullopt;
  // llama.cpp's other spellings (common_sampler_types_from_names with allow_alt_names).
  constexpr std::pair<const char*, SamplerKind> alt[] = {
      {"top-k", SamplerKind::top_k},         {"top-p", SamplerKind::top_p},
      {"nucleus", SamplerKind::top_p},       {"top-n-sigma", SamplerKind::top_n_sigma},
      {"typical-p", SamplerKind::typical_p}, {"typical", SamplerKind::typical_p},
      {"typ-p", SamplerKind::typical_p},     {"typ", SamplerKind::typical_p},
      {"min-p", SamplerKind::min_p},         {"temp", SamplerKind::temperature},
  };
  for (const auto& [n, k] : alt)
    if (name == n) return k;
  return std::nullopt;
}

inline std::optional<SamplerKind> sampler_from_char(char c) {
  for (const auto& e : sampler_kind_detail::k_kinds)
    if (c == e.chr) return e.kind;
  return std::nullopt;
}

}  // namespace rocky::runtime
