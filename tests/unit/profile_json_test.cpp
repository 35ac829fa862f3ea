// The profiled step in the trace (scheduler/profile_json.h): what is
// written reads back to the same step, and a malformed one is refused with
// a message that says what is wrong.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "scheduler/profile_json.h"
#include "scheduler/swap_plan.h"
#include "vmm/unit.h"

namespace vgpumem::scheduler {
namespace {

IterationProfile small_step(std::vector<vmm::Unit>& units) {
  RecordedIteration recorded;
  const std::vector<std::vector<std::uint32_t>> touches = {{0, 1}, {1}, {2}, {0, 2}, {}};
  for (std::size_t i = 0; i < touches.size(); ++i) {
    RecordedOp op;
    op.identity = i + 1;
    op.function = i == 1 || i == 4 ? nullptr : reinterpret_cast<CUfunction>(i + 1);
    op.api = i == 1 ? "cuMemcpyHtoDAsync_v2" : i == 4 ? "cuMemcpyDtoHAsync_v2" : "cuLaunchKernel";
    op.first_unit = static_cast<std::uint32_t>(recorded.units.size());
    op.unit_count = static_cast<std::uint32_t>(touches[i].size());
    for (std::uint32_t u : touches[i]) recorded.units.push_back(&units[u]);
    recorded.ops.push_back(op);
  }
  ProfileSources sources;
  sources.time = [&recorded](std::size_t op, double* duration, double* stall) {
    const std::uint64_t identity = recorded.ops[op].identity;
    *duration = 1000.0 * static_cast<double>(identity);
    *stall = identity == 3 ? 500.0 : 0.0;
  };
  sources.bytes = [&units](const vmm::Unit* unit) { return std::uint64_t{2} << (20 + (unit - units.data())); };
  IterationProfile profile = build_profile(recorded, sources);
  profile.offload_delay = 3;
  return profile;
}

// Format 1 counted the operation an offload then waited for after the
// grace: a trace written so plans with the same grace when read.
TEST(ProfileJson, AFormatOneTraceReadsWithTheGraceAlone) {
  std::vector<vmm::Unit> units(3);
  nlohmann::json old = profile_to_json(small_step(units));
  ASSERT_EQ(old["format"], 2);
  old["format"] = 1;
  old["offload_delay"] = 9;
  EXPECT_EQ(profile_from_json(old).offload_delay, 8u);
  old["offload_delay"] = 1;
  EXPECT_EQ(profile_from_json(old).offload_delay, 0u);
}

TEST(ProfileJson, WhatIsWrittenReadsBackToTheSameStep) {
  std::vector<vmm::Unit> units(3);
  const IterationProfile written = small_step(units);
  const IterationProfile read = profile_from_json(nlohmann::json::parse(profile_to_json(written).dump()));
  ASSERT_EQ(read.period(), written.period());
  EXPECT_EQ(read.offload_delay, 3u);
  EXPECT_EQ(read.total_bytes, written.total_bytes);
  EXPECT_DOUBLE_EQ(read.step_ns, written.step_ns);
  EXPECT_DOUBLE_EQ(read.stall_ns, written.stall_ns);
  EXPECT_EQ(read.backward_begins, written.backward_begins);
  ASSERT_EQ(read.units.size(), written.units.size());
  for (std::size_t u = 0; u < read.units.size(); ++u) {
    EXPECT_EQ(read.units[u].bytes, written.units[u].bytes);
    EXPECT_EQ(read.units[u].uses, written.units[u].uses);
    EXPECT_EQ(read.units[u].unit, nullptr) << "no address is written";
  }
  for (std::size_t i = 0; i < read.period(); ++i) {
    EXPECT_EQ(read.ops[i].kernel, written.ops[i].kernel) << i;
    EXPECT_EQ(read.ops[i].heavy, written.ops[i].heavy) << i;
    EXPECT_EQ(read.ops[i].to_host, written.ops[i].to_host) << i;
    EXPECT_DOUBLE_EQ(read.ops[i].start_ns, written.ops[i].start_ns) << i;
  }
  EXPECT_TRUE(written.ops[4].to_host) << "the program's copy to the host";
  EXPECT_FALSE(written.ops[1].to_host) << "a copy to the device";
  // The planners and the floor see the same step.
  const LinkModel link;
  EXPECT_DOUBLE_EQ(step_floor(read, 4 << 20, link), step_floor(written, 4 << 20, link));
}

TEST(ProfileJson, EachDistinctNameIsWrittenOnceAndOperationsIndexIt) {
  std::vector<vmm::Unit> units(3);
  const IterationProfile step = small_step(units);
  std::vector<std::string> names(step.period(), "gemm");
  names[1] = "cuMemcpyHtoDAsync_v2";
  const nlohmann::json json = nlohmann::json::parse(profile_to_json(step, &names).dump());
  ASSERT_EQ(json["names"], nlohmann::json({"gemm", "cuMemcpyHtoDAsync_v2"}));
  for (std::size_t i = 0; i < step.period(); ++i) {
    ASSERT_EQ(json["ops"][i].size(), 5u);
    EXPECT_EQ(json["names"][json["ops"][i][4].get<std::size_t>()], names[i]) << i;
    EXPECT_EQ(profiled_operation_name(json, i), names[i]) << i;
  }
  EXPECT_EQ(profiled_operation_name(json, step.period()), "") << "past the last operation";
  EXPECT_EQ(profiled_operation_name(profile_to_json(step), 0), "") << "an unnamed step";
  EXPECT_EQ(profile_from_json(json).period(), step.period()) << "a named step plans as an unnamed one";
  // A trace written before copies to the host were flagged: the name says so.
  std::vector<std::string> copy_names(step.period(), "gemm");
  copy_names[4] = "cuMemcpyDtoHAsync_v2";
  nlohmann::json older = nlohmann::json::parse(profile_to_json(step, &copy_names).dump());
  for (nlohmann::json& op : older["ops"]) op[2] = op[2].get<unsigned>() & 255u;
  EXPECT_TRUE(profile_from_json(older).ops[4].to_host);
  EXPECT_FALSE(profile_from_json(older).ops[3].to_host);
  EXPECT_FALSE(profile_to_json(step).contains("names"));
  nlohmann::json bad = json;
  bad["ops"][0][4] = 2;
  EXPECT_THROW(profile_from_json(bad), ProfileFormatError) << "an index past \"names\"";
}

TEST(ProfileJson, AMalformedStepIsRefusedSayingWhatIsWrong) {
  std::vector<vmm::Unit> units(3);
  nlohmann::json good = profile_to_json(small_step(units));
  const auto message = [](const nlohmann::json& json) {
    try {
      profile_from_json(json);
    } catch (const ProfileFormatError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  nlohmann::json bad = good;
  bad["format"] = 3;
  EXPECT_NE(message(bad).find("format"), std::string::npos) << message(bad);
  bad = good;
  bad["ops"][2][3] = {7};
  EXPECT_NE(message(bad).find("operation 2 names a unit that is not in"), std::string::npos) << message(bad);
  bad = good;
  bad["ops"][0] = {1, 2};
  EXPECT_NE(message(bad).find("[duration_ns, stall_ns, flags, [unit, ...]]"), std::string::npos) << message(bad);
  bad = good;
  bad["ops"][0][3] = {0, 0};
  EXPECT_NE(message(bad).find("names a unit twice"), std::string::npos) << message(bad);
  EXPECT_NE(message(nlohmann::json::array()).find("not a JSON object"), std::string::npos);
}

}  // namespace
}  // namespace vgpumem::scheduler
