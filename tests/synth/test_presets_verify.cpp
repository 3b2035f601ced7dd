// Done-when: `rocky verify` (CPU oracle vs the Vulkan backend, int8 path, default tolerance)
// passes on each new synth preset with 2 layers, on lavapipe (vocab cut to 2048 to stay within CI
// time; a few minutes on two busy cores, hence its own test binary and timeout).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "common/shared.hpp"
#include "synth/synth.hpp"

namespace {

using namespace rocky::synth;

int run_rocky(const std::string& args) {
  const std::string cmd = std::string(ROCKY_BINARY_DIR) + "/rocky " + args + " >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(SynthPresets, N6PresetsVerify) {
  for (const char* preset :
       {"qwen3-1.7b", "qwen3-4b", "llama-3.2-1b", "llama-3.2-3b", "qwen2.5-0.5b", "gemma-3-1b", "gemma-3-4b"}) {
    SCOPED_TRACE(preset);
    SynthOptions o;
    o.preset = preset;
    o.out = rocky::test::scratch_dir("synth_presets") + "/" + preset + ".gguf";
    o.type = FileType::Q4_K_M;
    o.layers = 2;
    o.vocab = 2048;
    o.progress = false;
    synth_model(o);
    EXPECT_EQ(run_rocky("verify -m " + o.out + " -p 'Hello world, the synthetic model speaks.'"), 0);
    EXPECT_EQ(run_rocky("info " + o.out), 0);
  }
}

}  // namespace
