#include "core/dtype.hpp"

#include <array>
#include <cassert>
#include <cctype>

namespace rocky {
namespace {

struct Row {
  uint32_t id;
  DTypeInfo info;
};

// Block sizes and bytes from ggml-common.h's block structs (QK_K = 256).
constexpr std::array<Row, 35> k_rows = {{
    {0, {"f32", 1, 4, true}},          {1, {"f16", 1, 2, true}},          {2, {"q4_0", 32, 18, true}},
    {3, {"q4_1", 32, 20, true}},       {6, {"q5_0", 32, 22, true}},       {7, {"q5_1", 32, 24, true}},
    {8, {"q8_0", 32, 34, true}},       {9, {"q8_1", 32, 36, false}},      {10, {"q2_K", 256, 84, true}},
    {11, {"q3_K", 256, 110, true}},    {12, {"q4_K", 256, 144, true}},    {13, {"q5_K", 256, 176, true}},
    {14, {"q6_K", 256, 210, true}},    {15, {"q8_K", 256, 292, false}},   {16, {"iq2_xxs", 256, 66, false}},
    {17, {"iq2_xs", 256, 74, false}},  {18, {"iq3_xxs", 256, 98, false}}, {19, {"iq1_s", 256, 50, false}},
    {20, {"iq4_nl", 32, 18, false}},   {21, {"iq3_s", 256, 110, false}},  {22, {"iq2_s", 256, 82, false}},
    {23, {"iq4_xs", 256, 136, false}}, {24, {"i8", 1, 1, false}},         {25, {"i16", 1, 2, false}},
    {26, {"i32", 1, 4, false}},        {27, {"i64", 1, 8, false}},        {28, {"f64", 1, 8, false}},
    {29, {"iq1_m", 256, 56, false}},   {30, {"bf16", 1, 2, true}},        {34, {"tq1_0", 256, 54, false}},
    {35, {"tq2_0", 256, 66, false}},   {39, {"mxfp4", 32, 17, false}},    {40, {"nvfp4", 64, 36, false}},
    {41, {"q1_0", 128, 18, false}},    {0xffffffffu, {"", 0, 0, false}},  // sentinel, never returned
}};

const Row* find_row(uint32_t id) {
  for (const Row& r : k_rows) {
    if (r.id == id && r.info.block_elems != 0) return &r;
  }
  return nullptr;
}

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t id) {
  const Row* r = find_row(id);
  if (!r) return std::nullopt;
  return r->info;
}

const DTypeInfo& dtype_info(DType t) {
  const Row* r = find_row(static_cast<uint32_t>(t));
  assert(r != nullptr);
  return r->info;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const Row& r : k_rows) {
    if (r.info.block_elems != 0 && iequal(r.info.name, name)) return static_cast<DType>(r.id);
  }
  return std::nullopt;
}

}  // namespace rocky
