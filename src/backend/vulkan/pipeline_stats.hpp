// --pipeline-stats: the driver's VK_KHR_pipeline_executable_properties statistics of each
// pipeline (register count, spills, scratch/local memory, instruction counts — names and units are
// the driver's), where the driver has the extension (NVIDIA does; lavapipe does not; panvk 25.0.7
// reports only "Code Size": use ../shared/mali/g610-stats there).
//
// Spill detection: a statistic whose name mentions "spill", "scratch" or "local memory" with a
// value > 0 means the pipeline touches per-thread scratch; refuse_spills() throws rocky::Error for
// such a pipeline (tile configs that spill are refused).
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/vulkan/pipelines.hpp"

namespace rocky::vulkan {

struct PipelineStat {
  std::string name;
  std::string description;
  double value = 0;
};

struct PipelineStats {
  std::string pipeline;  // "mul_mmq{1=12,2=128,…}" (shader and specialization constants)
  std::vector<PipelineStat> stats;
  bool spills = false;
};

// Statistics of every pipeline of `pipes` created with capture on (empty when unsupported).
std::vector<PipelineStats> collect_statistics(const Pipelines& pipes);
// Statistics of one pipeline.
PipelineStats pipeline_statistics(Device& dev, const Pipeline& p, const std::string& label);
// One line per pipeline, "pipeline LABEL[ SPILLS]: name=value …", to `to` (bench-op: stdout; the
// backend's ROCKY_PIPELINE_STATS: stderr, beside bench's table or JSON).
void print_stats(const std::vector<PipelineStats>& s, std::FILE* to = stdout);
nlohmann::json stats_json(const std::vector<PipelineStats>& s);
// rocky::Error when the pipeline's statistics show spills/scratch.
void refuse_spills(const PipelineStats& s);

}  // namespace rocky::vulkan
