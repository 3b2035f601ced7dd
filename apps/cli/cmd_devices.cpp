// rocky devices [--json] — every Vulkan device with the limits and features rocky probes.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "backend/vulkan/device.hpp"
#include "commands.hpp"

namespace rocky::cli {
namespace {

struct DevicesOpts {
  bool json = false;
  bool validation = false;
};

std::string bytes_str(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1ull << 20));
  return fmt::format("{} KiB", b / 1024);
}

int run_devices(const DevicesOpts& o) {
  vulkan::InstanceOptions io = runtime::instance_options(process_env());
  io.validation = o.validation;
  vulkan::Instance inst(io);
  const size_t n = inst.physical_devices().size();
  if (n == 0) inst.probe(0);  // throws the "no device" error with its fix
  nlohmann::json all = nlohmann::json::array();
  for (uint32_t i = 0; i < n; ++i) {
    vulkan::DeviceInfo d = inst.probe(i);
    if (o.json) {
      nlohmann::json j;
      j["index"] = d.index;
      j["name"] = d.name;
      j["driver"] = d.driver_name;
      j["driver_info"] = d.driver_info;
      j["api_version"] = d.api_string();
      j["type"] = d.type_name();
      j["uma"] = d.uma;
      j["fp16"] = d.fp16;
      j["int8"] = d.int8;
      j["int8_dot"] = d.int8_dot;
      j["int8_dot_accelerated"] = d.int8_dot_accelerated;
      j["subgroup_size"] = d.subgroup_size;
      j["subgroup_size_range"] = {d.subgroup_min, d.subgroup_max};
      j["shared_memory_bytes"] = d.shared_memory;
      j["max_workgroup_invocations"] = d.max_workgroup_invocations;
      j["max_workgroup_size"] = d.max_workgroup_size;
      j["max_storage_buffer_range"] = d.max_storage_buffer_range;
      j["max_allocation"] = d.max_allocation;
      j["timestamps"] = d.timestamps;
      nlohmann::json heaps = nlohmann::json::array();
      for (const auto& h : d.heaps)
        heaps.push_back({{"bytes", h.size}, {"device_local", h.device_local}, {"host_visible", h.host_visible}});
      j["memory_heaps"] = heaps;
      all.push_back(j);
      continue;
    }
    fmt::print("vulkan:{}  {}\n", d.index, d.name);
    fmt::print("  driver               {} ({})\n", d.driver_name, d.driver_info);
    fmt::print("  Vulkan API           {}\n", d.api_string());
    fmt::print("  type                 {}{}\n", d.type_name(), d.uma ? ", UMA (host-visible device memory)" : "");
    fmt::print("  fp16 / int8          {} / {}\n", d.fp16 ? "yes" : "no", d.int8 ? "yes" : "no");
    fmt::print("  int8 dot product     {}\n",
               d.int8_dot ? (d.int8_dot_accelerated ? "yes, accelerated" : "yes, not accelerated") : "no");
    fmt::print("  subgroup size        {} (range {}..{})\n", d.subgroup_size, d.subgroup_min, d.subgroup_max);
    fmt::print("  shared memory        {}\n", bytes_str(d.shared_memory));
    fmt::print("  max workgroup        {} invocations, size {}×{}×{}\n", d.max_workgroup_invocations,
               d.max_workgroup_size[0], d.max_workgroup_size[1], d.max_workgroup_size[2]);
    fmt::print("  maxStorageBufferRange {} ({} bytes)\n", bytes_str(d.max_storage_buffer_range),
               d.max_storage_buffer_range);
    fmt::print("  max allocation       {}\n", bytes_str(d.max_allocation));
    fmt::print("  timestamps           {}\n", d.timestamps ? "yes" : "no");
    for (size_t h = 0; h < d.heaps.size(); ++h) {
      fmt::print("  memory heap {}        {}{}{}\n", h, bytes_str(d.heaps[h].size),
                 d.heaps[h].device_local ? ", device-local" : "", d.heaps[h].host_visible ? ", host-visible" : "");
    }
  }
  if (o.json) fmt::print("{}\n", all.dump(2));
  return 0;
}

}  // namespace

void add_devices(CLI::App& app, Runner& run) {
  auto o = std::make_shared<DevicesOpts>();
  auto* sub = app.add_subcommand("devices", "List Vulkan devices and the limits rocky probes");
  sub->add_flag("--json", o->json, "Print one JSON array");
  sub->add_flag("--validation", o->validation, "Create the instance with the validation layer");
  sub->callback([&run, o] { run = [o] { return run_devices(*o); }; });
}

}  // namespace rocky::cli
