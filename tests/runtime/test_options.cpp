// The program's environment (runtime/options.hpp): ROCKY_TUNE (a profile file or an inline JSON
// fragment), ROCKY_SWITCH (the A/B kill switches), the memory cap and the fence timeout, parsed once
// into vulkan::LabOptions; every bad value is a rocky::Error naming the variable and the field.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "runtime/options.hpp"
#include "tune/tile.hpp"

namespace rocky::runtime {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Options, TuneInlineFragmentAndFile) {
  vulkan::LabOptions lab;
  parse_tune(R"(  {"mmv": {"q8": 8}, "attn_rule": {"split_chunk": 64}})", lab);
  EXPECT_EQ(lab.tune_source, "ROCKY_TUNE");
  ASSERT_TRUE(lab.tune.is_object());
  const tune::DeviceProfile p = tune::apply_profile_json(lab.tune, tune::builtin_profile("llvmpipe"), lab.tune_source);
  EXPECT_EQ(p.mmv.q8, 8u);
  EXPECT_EQ(p.attn_rule.split_chunk, 64u);
  EXPECT_EQ(p.mmv.wg, tune::builtin_profile("llvmpipe").mmv.wg);
  const std::string path = test::scratch_dir("options") + "/tune.json";
  std::ofstream(path) << R"({"profile": "nvidia", "delta_chunk": 16})";
  parse_tune(path, lab);
  EXPECT_EQ(lab.tune_source, "ROCKY_TUNE " + path);
  EXPECT_EQ(tune::apply_profile_json(lab.tune, tune::builtin_profile("llvmpipe"), "x").delta_chunk, 16u);
  parse_tune("", lab);
  EXPECT_TRUE(lab.tune.is_null());
}

TEST(Options, TuneErrorsNameTheVariableAndField) {
  auto err = [](const std::string& v) {
    vulkan::LabOptions lab;
    return error_of([&] { parse_tune(v, lab); });
  };
  EXPECT_NE(err("/nonexistent/p.json").find("ROCKY_TUNE /nonexistent/p.json: cannot open"), std::string::npos);
  EXPECT_NE(err(R"({"mmv": )").find("ROCKY_TUNE: not valid JSON"), std::string::npos);
  EXPECT_NE(err(R"({"mmv": {"wg": 48}})").find("ROCKY_TUNE: mmv.wg: expected a power of two"), std::string::npos);
  EXPECT_NE(err(R"({"attn_rule": {"fa_groups": -1}})").find("ROCKY_TUNE: attn_rule.fa_groups"), std::string::npos);
  EXPECT_NE(err(R"({"split": 1})").find("ROCKY_TUNE: unknown field 'split'"), std::string::npos);
  EXPECT_NE(err(R"({"profile": 3})").find("ROCKY_TUNE: profile: expected a name"), std::string::npos);
  const std::string path = test::scratch_dir("options") + "/array.json";
  std::ofstream(path) << "[1]";
  EXPECT_NE(err(path).find("ROCKY_TUNE " + path + ": expected a JSON object"), std::string::npos);
}

TEST(Options, Switches) {
  vulkan::LabOptions lab;
  parse_switches("matmul=mm,attn=decode,fuse_epilogue=0,decode_replay=1,fuse_decode=0,fold_norm=1", lab);
  EXPECT_EQ(lab.matmul, vulkan::MatmulPath::MM);
  EXPECT_EQ(lab.attn, vulkan::AttnKernel::DECODE);
  EXPECT_EQ(lab.fuse_epilogue, false);
  EXPECT_EQ(lab.decode_replay, true);
  EXPECT_EQ(lab.fuse_decode, false);
  EXPECT_EQ(lab.fold_norm, true);
  vulkan::LabOptions none;
  parse_switches("", none);
  EXPECT_FALSE(none.matmul || none.fuse_epilogue || none.decode_replay || none.fuse_decode || none.fold_norm);
  EXPECT_EQ(none.attn, vulkan::AttnKernel::AUTO);
  auto err = [](const std::string& v) {
    vulkan::LabOptions l;
    return error_of([&] { parse_switches(v, l); });
  };
  EXPECT_NE(err("matmul=fast").find("ROCKY_SWITCH: matmul=fast"), std::string::npos);
  EXPECT_NE(err("attn=").find("ROCKY_SWITCH: attn="), std::string::npos);
  EXPECT_NE(err("fold_norm=yes").find("fold_norm=yes: expected 0 or 1"), std::string::npos);
  EXPECT_NE(err("mmv_q8=8").find("unknown switch 'mmv_q8'"), std::string::npos);
  EXPECT_NE(err("fuse_decode=0,").find("'' is not key=value"), std::string::npos);
  EXPECT_NE(err("=1").find("is not key=value"), std::string::npos);
  EXPECT_NE(err("attn=simple,attn=flash").find("attn given twice"), std::string::npos);
}

TEST(Options, TimeoutAndMemoryLimit) {
  EXPECT_EQ(parse_timeout_s(""), 1800u);
  EXPECT_EQ(parse_timeout_s("60"), 60u);
  for (const char* bad : {"0", "-5", "5s", " 5", "soon", "99999999999999999999999"})
    EXPECT_NE(error_of([&] { parse_timeout_s(bad); }).find("ROCKY_VULKAN_TIMEOUT_S"), std::string::npos) << bad;
  EXPECT_EQ(parse_device_memory_limit(""), 0u);
  EXPECT_EQ(parse_device_memory_limit("123456"), 123456u);
  EXPECT_NE(error_of([] { parse_device_memory_limit("-5"); }).find("ROCKY_DEVICE_MEMORY_LIMIT"), std::string::npos);
}

// ROCKY_FAULT: kind@N (the Nth only), kind%N (every Nth), comma-joined; anything else names the variable.
TEST(Options, Fault) {
  EXPECT_TRUE(parse_fault("").empty());
  const fault::Plan p = parse_fault("alloc@3,lost%40,disk@1,kill@2");
  ASSERT_EQ(p.rules.size(), 4u);
  EXPECT_EQ(p.rules[0].kind, fault::Kind::Alloc);
  EXPECT_EQ(p.rules[0].n, 3u);
  EXPECT_FALSE(p.rules[0].every);
  EXPECT_EQ(p.rules[1].kind, fault::Kind::Lost);
  EXPECT_EQ(p.rules[1].n, 40u);
  EXPECT_TRUE(p.rules[1].every);
  EXPECT_EQ(p.rules[2].kind, fault::Kind::Disk);
  EXPECT_EQ(p.rules[3].kind, fault::Kind::Kill);
  for (const char* bad : {"alloc", "alloc@0", "alloc@-1", "alloc@x", "boom@3", "lost@3,", "@3", "alloc@3 ", "disk%"})
    EXPECT_NE(error_of([&] { parse_fault(bad); }).find("ROCKY_FAULT"), std::string::npos) << bad;
  EXPECT_NE(error_of([] { parse_fault("boom@3"); }).find("boom"), std::string::npos);
  // The injector counts events per kind and fails the chosen ones.
  fault::install(parse_fault("lost@2,alloc%3"));
  EXPECT_FALSE(fault::hit(fault::Kind::Lost));
  EXPECT_TRUE(fault::hit(fault::Kind::Lost));
  EXPECT_FALSE(fault::hit(fault::Kind::Lost));
  int allocs = 0;
  for (int i = 0; i < 9; ++i) allocs += fault::hit(fault::Kind::Alloc) ? 1 : 0;
  EXPECT_EQ(allocs, 3);
  EXPECT_EQ(fault::injected(fault::Kind::Alloc), 3u);
  EXPECT_FALSE(fault::hit(fault::Kind::Disk));
  fault::install({});
  EXPECT_FALSE(fault::hit(fault::Kind::Lost));
  ::setenv("ROCKY_FAULT", "lost@x", 1);
  EXPECT_NE(error_of([] { read_env(); }).find("ROCKY_FAULT"), std::string::npos);
  ::setenv("ROCKY_FAULT", "lost@4", 1);
  EXPECT_EQ(read_env().fault.rules.size(), 1u);
  ::unsetenv("ROCKY_FAULT");
}

// read_env reads every variable once; a bad one makes it throw (main: exit 1).
TEST(Options, ReadEnv) {
  ::setenv("ROCKY_TUNE", R"({"mmv": {"q8": 4}})", 1);
  ::setenv("ROCKY_SWITCH", "attn=simple", 1);
  ::setenv("ROCKY_VULKAN_TIMEOUT_S", "30", 1);
  EnvOptions e = read_env();
  EXPECT_EQ(e.lab.tune["mmv"]["q8"], 4);
  EXPECT_EQ(overrides_in_effect(e).at("ROCKY_SWITCH"), "attn=simple");  // as given
  EXPECT_EQ(e.lab.attn, vulkan::AttnKernel::SIMPLE);
  EXPECT_EQ(e.lab.vulkan_timeout_s, 30u);
  ::setenv("ROCKY_SWITCH", "attn=fastest", 1);
  EXPECT_THROW(read_env(), Error);
  ::unsetenv("ROCKY_TUNE");
  ::unsetenv("ROCKY_SWITCH");
  ::unsetenv("ROCKY_VULKAN_TIMEOUT_S");
  e = read_env();
  EXPECT_TRUE(e.lab.tune.is_null());
  EXPECT_TRUE(e.set.empty() || !e.set.count("ROCKY_TUNE"));
  // A variable the two replaced is an error saying what to use, not silently ignored.
  ::setenv("ROCKY_ATTN_TILE", "64,16,2,2", 1);
  EXPECT_NE(error_of([] { read_env(); }).find("ROCKY_ATTN_TILE is no longer read: use ROCKY_TUNE"), std::string::npos);
  ::unsetenv("ROCKY_ATTN_TILE");
  EXPECT_EQ(e.lab.vulkan_timeout_s, 1800u);
}

}  // namespace
}  // namespace rocky::runtime
