// rocky info MODEL.gguf [--json] — metadata, tensor table, totals and an architecture summary.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gguf/gguf.hpp"

namespace rocky::cli {
namespace {

struct InfoOpts {
  std::string model;
  bool json = false;
};

int run_info(const InfoOpts& o) {
  auto f = gguf::GgufFile::open(o.model);
  uint64_t params = 0, bytes = 0;
  for (const auto& t : f.tensors()) {
    params += t.n_elements;
    bytes += t.n_bytes;
  }
  if (o.json) {
    nlohmann::json j;
    j["file"] = f.path();
    j["version"] = f.version();
    j["n_tensors"] = f.tensors().size();
    j["n_params"] = params;
    j["tensor_bytes"] = bytes;
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("file: {}\nGGUF version: {}\ntensors: {}\nparameters: {}\ntensor bytes: {}\n", f.path(),
             f.version(), f.tensors().size(), params, bytes);
  return 0;
}

}  // namespace

void add_info(CLI::App& app, Runner& run) {
  auto o = std::make_shared<InfoOpts>();
  auto* sub = app.add_subcommand("info", "Show a GGUF file's metadata, tensors and totals");
  sub->add_option("model", o->model, "GGUF file")->required();
  sub->add_option("-m,--model", o->model, "GGUF file (same as the positional argument)");
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->callback([&run, o] { run = [o] { return run_info(*o); }; });
}

}  // namespace rocky::cli
