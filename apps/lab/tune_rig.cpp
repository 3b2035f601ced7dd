#include "lab/tune_rig.hpp"

#include <algorithm>
#include <cmath>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "quant/quant.hpp"

namespace rocky::lab {

void make_rig(Rig& r, uint32_t device, uint64_t timeout_s) {
  r.rec.reset();
  r.pipes.reset();
  r.mem.reset();
  r.dev.reset();
  const runtime::EnvOptions& penv = cli::process_env();
  if (!r.inst) r.inst = std::make_shared<vulkan::Instance>(runtime::instance_options(penv));
  r.dev = std::make_unique<vulkan::Device>(r.inst, device);
  r.mem = std::make_unique<vulkan::Memory>(*r.dev, 0);
  r.pipes = std::make_unique<vulkan::Pipelines>(*r.dev, true, penv.cache_dir);
  r.pipes->set_capture_statistics(true);  // where the driver reports statistics: spills are refused
  r.rec = std::make_unique<vulkan::Recorder>(*r.dev, r.dev->info().max_storage_buffer_range, timeout_s);
}

namespace {
bool fatal_error(const std::string& what) {
  return what.find("LOST") != std::string::npos || what.find("lost") != std::string::npos ||
         what.find("did not finish") != std::string::npos || what.find("TIMEOUT") != std::string::npos;
}
}  // namespace

double nmse(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::nan("");
    const double d = double(got[i]) - ref[i];
    num += d * d;
    den += double(ref[i]) * ref[i];
  }
  return den > 0 ? num / den : num;
}

std::vector<uint8_t> random_weights(DType type, uint32_t m, uint32_t k, std::mt19937& rng) {
  const uint64_t rb = row_bytes(type, k);
  std::vector<uint8_t> w(rb * m);
  if (quant::can_quantize(type)) {
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> row(k);
    for (uint32_t r = 0; r < m; ++r) {
      for (auto& v : row) v = g(rng);
      quant::quantize_row(type, row.data(), w.data() + rb * r, k);
    }
    return w;
  }
  fail("tune: no quantizer for weight type {} (the random test weights are made by quantizing)", dtype_name(type));
}

Tuner::Tuner(uint32_t device, uint64_t timeout_s, uint32_t reps) : device_(device), timeout_s_(timeout_s), reps_(reps) {
  make_rig(rig_, device_, timeout_s_);
}

Measure Tuner::measure(const std::function<void(vulkan::ops::Env&)>& run, vulkan::Buffer& ybuf, size_t ny,
                       const std::vector<float>* ref, double tol) {
  Measure r;
  try {
    vulkan::ops::Env env{*rig_.rec, *rig_.pipes, info(), {}, 128, false};
    std::vector<float> poison(ny, std::nanf(""));
    rig_.mem->upload(ybuf, 0, poison.data(), ny * 4);
    std::vector<double> t;
    for (uint32_t i = 0; i <= reps_; ++i) {
      rig_.rec->begin(true);
      run(env);
      rig_.rec->submit_and_wait();
      if (rig_.rec->timings().empty()) fail("the device returned no timestamps");
      if (i == 0) continue;  // warm-up (and the pipeline's compile)
      double ms = 0;
      for (const auto& x : rig_.rec->timings()) ms += x.ms;
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    r.ms = t.front();
    r.spread = t.front() > 0 ? (t.back() - t.front()) / t.front() : 0;
    std::vector<float> y(ny);
    rig_.mem->download(ybuf, 0, y.data(), ny * 4);
    if (ref) {
      const double e = nmse(y, *ref);
      if (!(e <= tol)) fail("wrong output: NMSE {:.3e} against the reference kernel (> {:.0e})", e, tol);
    }
    last_y_ = std::move(y);
  } catch (const std::exception& e) {
    r.error = e.what();
    r.fatal = fatal_error(r.error);
  }
  if (r.fatal) {
    if (on_rebuild) on_rebuild();  // the buffers of the old device go first
    try {
      make_rig(rig_, device_, timeout_s_);
    } catch (const std::exception& e) {
      fail("tune: the device did not come back after '{}': {}", r.error, e.what());
    }
  }
  return r;
}

}  // namespace rocky::lab
