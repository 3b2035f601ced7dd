#include "backend/vulkan/pipeline_stats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.hpp"

namespace rocky::vulkan {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

PipelineStats pipeline_statistics(Device& dev, const Pipeline& p, const std::string& label) {
  PipelineStats out;
  out.pipeline = label;
  if (!dev.info().pipeline_stats) return out;
  auto get_props = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      vkGetInstanceProcAddr(dev.instance().handle(), "vkGetPipelineExecutablePropertiesKHR"));
  auto get_stats = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetInstanceProcAddr(dev.instance().handle(), "vkGetPipelineExecutableStatisticsKHR"));
  if (!get_props || !get_stats) return out;
  VkPipelineInfoKHR pi{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  pi.pipeline = p.pipeline;
  uint32_t n_exec = 0;
  vk_check(get_props(dev.handle(), &pi, &n_exec, nullptr), "vkGetPipelineExecutablePropertiesKHR");
  for (uint32_t e = 0; e < n_exec; ++e) {
    VkPipelineExecutableInfoKHR ei{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    ei.pipeline = p.pipeline;
    ei.executableIndex = e;
    uint32_t n = 0;
    if (get_stats(dev.handle(), &ei, &n, nullptr) != VK_SUCCESS) continue;
    std::vector<VkPipelineExecutableStatisticKHR> st(n, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    if (get_stats(dev.handle(), &ei, &n, st.data()) != VK_SUCCESS) continue;
    for (const auto& s : st) {
      PipelineStat ps{s.name, s.description, 0};
      switch (s.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: ps.value = s.value.b32; break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: ps.value = static_cast<double>(s.value.i64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: ps.value = static_cast<double>(s.value.u64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: ps.value = s.value.f64; break;
        default: break;
      }
      const std::string nm = lower(ps.name);
      // NVIDIA 580.159.04 reports "Local Memory Size" as 2^36 + bytes (seen on the H200: 68719476736
      // for a shader without local memory, 68719476992 for one with 256 B): keep the low 32 bits.
      if (nm.find("local memory") != std::string::npos && ps.value >= 4294967296.0)
        ps.value = static_cast<double>(static_cast<uint64_t>(ps.value) & 0xFFFFFFFFull);
      if ((nm.find("spill") != std::string::npos || nm.find("scratch") != std::string::npos ||
           nm.find("local memory") != std::string::npos) &&
          ps.value > 0)
        out.spills = true;
      out.stats.push_back(std::move(ps));
    }
  }
  return out;
}

std::vector<PipelineStats> collect_statistics(const Pipelines& pipes) {
  std::vector<PipelineStats> all;
  for (const auto& [spec, p] : pipes.all()) {
    std::string label = p->shader + "{";
    for (size_t i = 0; i < spec.size(); ++i)
      label += fmt::format("{}{}={}", i ? "," : "", spec[i].first, spec[i].second);
    label += "}";
    all.push_back(pipeline_statistics(pipes.device(), *p, label));
  }
  return all;
}

void print_stats(const std::vector<PipelineStats>& s, std::FILE* to) {
  for (const auto& p : s) {
    if (p.stats.empty()) {
      fmt::print(to, "pipeline {}: no statistics (driver lacks VK_KHR_pipeline_executable_properties)\n", p.pipeline);
      continue;
    }
    std::string line = fmt::format("pipeline {}{}:", p.pipeline, p.spills ? " SPILLS" : "");
    for (const auto& st : p.stats) line += fmt::format(" {}={}", st.name, st.value);
    fmt::print(to, "{}\n", line);
  }
}

nlohmann::json stats_json(const std::vector<PipelineStats>& s) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : s) {
    nlohmann::json st = nlohmann::json::object();
    for (const auto& x : p.stats) st[x.name] = x.value;
    a.push_back({{"pipeline", p.pipeline}, {"spills", p.spills}, {"statistics", st}});
  }
  return a;
}

void refuse_spills(const PipelineStats& s) {
  if (!s.spills) return;
  std::string detail;
  for (const auto& x : s.stats) detail += fmt::format(" {}={}", x.name, x.value);
  fail("pipeline {} spills registers to scratch memory (refused; choose a tile with fewer accumulators):{}", s.pipeline,
       detail);
}

}  // namespace rocky::vulkan
