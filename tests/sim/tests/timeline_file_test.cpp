// VGPUSIM_TIMELINE: the simulator's own timeline file. Each scenario runs in
// a child process, since the file is written at exit; the child notes the
// simulated times it saw beside the file and the parent checks the file
// against them.
#include <pthread.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim_test_support.h"

namespace {

using namespace simtest;
using nlohmann::json;

constexpr std::size_t kLinkBytes = 55'000'000;  // 1 ms at 55 GB/s
constexpr double kCopySetupUs = 2.0;            // docs/simulated-driver.md, "Timeline"
// Scenarios that check the clock's mechanics to the nanosecond run under the
// idle model, which charges no host time for issuing work.
constexpr const char* kIdleModel = "VGPUSIM_COST_MODEL=idle";

void nothing(void**, const vgpusimLaunch*, void*) {}

std::string scratch(const std::string& name) {
  return ::testing::TempDir() + "vgpusim-timeline-" + std::to_string(::getpid()) + "-" + name;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return in.good() ? json::parse(in) : json();
}

// The events of a phase ("X", "C", "M").
std::vector<json> events(const json& timeline, const std::string& phase) {
  std::vector<json> found;
  for (const json& e : timeline.at("traceEvents")) {
    if (e.at("ph") == phase) found.push_back(e);
  }
  return found;
}

TEST(TimelineFile, OverlappingKernelAndCopiesLandOnThreeLanesAtTheirSimulatedTimes) {
  const std::string path = scratch("overlap.json");
  ASSERT_EQ(run_child("overlap", {"VGPUSIM_TIMELINE=" + path, kIdleModel}), 0);
  const json timeline = read_json(path);
  const json times = read_json(path + ".times");
  std::remove(path.c_str());
  std::remove((path + ".times").c_str());
  ASSERT_TRUE(timeline.is_object());
  EXPECT_EQ(timeline.at("otherData").at("events_dropped"), 0);
  EXPECT_EQ(timeline.at("otherData").at("max_events"), 200000);

  std::map<int, std::string> lanes;
  for (const json& m : events(timeline, "M")) {
    if (m.at("name") == "thread_name" && m.at("pid") == 0) lanes[m.at("tid").get<int>()] = m.at("args").at("name");
  }
  EXPECT_EQ(lanes, (std::map<int, std::string>{{1, "compute"}, {2, "copy to device"}, {3, "copy to host"}}));

  // The three operations issued at t0, after the setup's memsets were done.
  const double t0 = times.at("issued_ns").get<double>() / 1000.0;
  std::map<std::string, json> by_lane;
  for (const json& x : events(timeline, "X")) {
    if (x.at("ts").get<double>() >= t0) by_lane[lanes.at(x.at("tid").get<int>())] = x;
  }
  ASSERT_EQ(by_lane.size(), 3u) << timeline.dump(1);
  const json& kernel = by_lane.at("compute");
  EXPECT_EQ(kernel.at("name"), "timeline_file_1ms");
  EXPECT_EQ(kernel.at("args").at("kind"), "timeline_file_1ms");
  EXPECT_EQ(kernel.at("cat"), "kernel");
  EXPECT_NEAR(kernel.at("ts").get<double>(), t0, 1e-3);
  EXPECT_NEAR(kernel.at("dur").get<double>(), 1000.0, 1e-3);
  for (const char* lane : {"copy to device", "copy to host"}) {
    const json& copy = by_lane.at(lane);
    EXPECT_EQ(copy.at("args").at("kind"), "copy") << lane;
    EXPECT_EQ(copy.at("args").at("bytes"), kLinkBytes) << lane;
    EXPECT_NEAR(copy.at("ts").get<double>(), t0, 1e-3) << lane << ": its own engine, free at t0";
    EXPECT_NEAR(copy.at("dur").get<double>(), 1000.0 + kCopySetupUs, 1e-3) << lane;
  }
  // The memsets before t0 ran on the compute engine too, with their bytes.
  bool memset_seen = false;
  for (const json& x : events(timeline, "X")) {
    if (x.at("cat") == "memset") {
      memset_seen = true;
      EXPECT_EQ(lanes.at(x.at("tid").get<int>()), "compute");
      EXPECT_EQ(x.at("args").at("bytes"), kLinkBytes);
    }
  }
  EXPECT_TRUE(memset_seen);
  // cuMemAlloc memory is mapped as it is charged.
  const std::vector<json> counters = events(timeline, "C");
  ASSERT_EQ(counters.size(), 4u) << "the start, two allocations, the end";
  EXPECT_EQ(counters[2].at("args").at("physical"), 2 * 55'000'064ull) << "in 512-byte units";
  for (const json& c : counters) EXPECT_EQ(c.at("args").at("mapped"), c.at("args").at("physical"));
}

TEST(TimelineFile, CounterFollowsPhysicalMemoryChargedAndMapped) {
  const std::string path = scratch("counter.json");
  ASSERT_EQ(run_child("create_map_release", {"VGPUSIM_TIMELINE=" + path}), 0);
  const json timeline = read_json(path);
  const json times = read_json(path + ".times");
  std::remove(path.c_str());
  std::remove((path + ".times").c_str());
  ASSERT_TRUE(timeline.is_object());
  const std::vector<json> counters = events(timeline, "C");
  for (const json& c : counters) {
    EXPECT_EQ(c.at("name"), "device 0 physical bytes");
    EXPECT_EQ(c.at("args").at("device_memory"), 1ull << 30) << "the device's size as a series";
  }
  // (time, physical, mapped): the start; cuMemCreate charges 64 MiB;
  // cuMemMap maps them, cuMemUnmap unmaps them; cuMemRelease gives them back;
  // the end of the run repeats the last value.
  struct Step {
    double us;
    std::uint64_t physical, mapped;
  };
  std::vector<Step> steps;
  for (const json& c : counters) {
    steps.push_back({c.at("ts").get<double>(), c.at("args").at("physical").get<std::uint64_t>(),
                     c.at("args").at("mapped").get<std::uint64_t>()});
  }
  ASSERT_EQ(steps.size(), 6u) << timeline.dump(1);
  const auto at = [&](const char* key) { return times.at(key).get<double>() / 1000.0; };
  const std::uint64_t b = 64 * kMiB;
  const std::vector<std::tuple<const char*, const char*, std::uint64_t, std::uint64_t>> expected = {
      {"created_ns", "mapped_ns", b, 0}, {"mapped_ns", "unmapped_ns", b, b},
      {"unmapped_ns", "released_ns", b, 0}, {"released_ns", "after_ns", 0, 0}};
  EXPECT_EQ(steps[0].us, 0.0);
  EXPECT_EQ(steps[0].physical, 0u);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& [from, to, physical, mapped] = expected[i];
    const Step& step = steps[i + 1];
    EXPECT_GE(step.us, at(from)) << "step " << i + 1 << ": stamped during the call that made it";
    EXPECT_LE(step.us, at(to)) << "step " << i + 1;
    EXPECT_EQ(step.physical, physical) << "step " << i + 1;
    EXPECT_EQ(step.mapped, mapped) << "step " << i + 1;
  }
  EXPECT_GE(steps[5].us, at("after_ns"));
  EXPECT_EQ(steps[5].physical, 0u);
}

TEST(TimelineFile, BoundedAndCountsWhatItDrops) {
  const std::string path = scratch("bounded.json");
  ASSERT_EQ(run_child("overlap", {"VGPUSIM_TIMELINE=" + path, "VGPUSIM_TIMELINE_MAX_EVENTS=2"}), 0);
  const json timeline = read_json(path);
  std::remove(path.c_str());
  std::remove((path + ".times").c_str());
  ASSERT_TRUE(timeline.is_object());
  EXPECT_EQ(timeline.at("otherData").at("max_events"), 2);
  EXPECT_GT(timeline.at("otherData").at("events_dropped").get<int>(), 0);
  // Recorded: two; the counters at the start and the end are always there.
  EXPECT_EQ(events(timeline, "X").size() + events(timeline, "C").size(), 2u + 2u);
}

// Each operation says when the host issued it: an upload queued behind
// another on the copy-to-device engine was issued with it and started when
// the engine was free, so whatever it waited for was the engine, not the host.
TEST(TimelineFile, EachOperationCarriesWhenItWasIssued) {
  const std::string path = scratch("queued.json");
  ASSERT_EQ(run_child("queued", {"VGPUSIM_TIMELINE=" + path, kIdleModel}), 0);
  const json timeline = read_json(path);
  const json times = read_json(path + ".times");
  std::remove(path.c_str());
  std::remove((path + ".times").c_str());
  ASSERT_TRUE(timeline.is_object());
  const double t0 = times.at("issued_ns").get<double>() / 1000.0;
  std::vector<json> uploads;
  for (const json& x : events(timeline, "X")) {
    if (x.at("cat") == "copy" && x.at("ts").get<double>() >= t0) uploads.push_back(x);
  }
  ASSERT_EQ(uploads.size(), 2u) << timeline.dump(1);
  for (const json& upload : uploads) EXPECT_NEAR(upload.at("args").at("issued").get<double>(), t0, 1e-3);
  EXPECT_NEAR(uploads[0].at("ts").get<double>(), t0, 1e-3);
  EXPECT_NEAR(uploads[1].at("ts").get<double>(), t0 + 1000.0 + kCopySetupUs, 1e-3) << "behind the first";
  for (const json& x : events(timeline, "X")) {
    if (x.at("cat") == "host") continue;  // the host lanes' spans: what a thread paid for, not an operation
    EXPECT_LE(x.at("args").at("issued").get<double>(), x.at("ts").get<double>() + 1e-3) << x.dump();
  }
}

// Host lanes: what each host thread paid for and waited for, on its own
// lane named as the thread is, and which thread issued each operation. A
// VMM call's own cost is named by the call ("cuMemCreate"); a second thread's call while the
// first holds the driver's lock waits as "driver lock" first; a launch is
// "issue"; a synchronisation on a 1 ms kernel is "device wait"; a handoff
// named by what it waited for (vgpusimHostHandoffFor) is named so.
TEST(TimelineFile, HostLanesShowWhatEachThreadPaidForAndWaitedFor) {
  const std::string path = scratch("host-lanes.json");
  ASSERT_EQ(run_child("host_lanes", {"VGPUSIM_TIMELINE=" + path}), 0);
  const json timeline = read_json(path);
  const json times = read_json(path + ".times");
  std::remove(path.c_str());
  std::remove((path + ".times").c_str());
  ASSERT_TRUE(timeline.is_object());
  const int host_pid = 1;  // after the one device
  std::map<std::string, int> lane_of;
  for (const json& m : events(timeline, "M")) {
    if (m.at("pid") == host_pid && m.at("name") == "process_name") {
      EXPECT_EQ(m.at("args").at("name"), "host");
    }
    if (m.at("pid") == host_pid && m.at("name") == "thread_name") {
      const std::string name = m.at("args").at("name");
      lane_of[name.substr(name.find('(') + 1, name.find(')') - name.find('(') - 1)] = m.at("tid").get<int>();
    }
  }
  ASSERT_TRUE(lane_of.count("trainer") && lane_of.count("vmm-first") && lane_of.count("vmm-second"))
      << timeline.dump(1);
  // Each lane's spans by name, in microseconds.
  std::map<int, std::map<std::string, std::vector<json>>> spans;
  for (const json& x : events(timeline, "X")) {
    if (x.at("pid") == host_pid) {
      EXPECT_EQ(x.at("cat"), "host");
      spans[x.at("tid").get<int>()][x.at("name")].push_back(x);
    }
  }
  const double create_us = 70.8;  // a 2 MiB cuMemCreate, calibrated (docs/simulated-driver.md)
  const auto& first = spans[lane_of["vmm-first"]];
  ASSERT_EQ(first.count("cuMemCreate"), 1u) << timeline.dump(1);
  EXPECT_NEAR(first.at("cuMemCreate").at(0).at("dur").get<double>(), create_us, 0.5);
  EXPECT_EQ(first.count("driver lock"), 0u) << "the lock was free";
  const auto& second = spans[lane_of["vmm-second"]];
  ASSERT_EQ(second.count("driver lock"), 1u) << timeline.dump(1);
  ASSERT_EQ(second.count("cuMemCreate"), 1u);
  const json& waited = second.at("driver lock").at(0);
  const json& called = second.at("cuMemCreate").at(0);
  EXPECT_NEAR(waited.at("ts").get<double>(), times.at("second_before_ns").get<double>() / 1000.0, 1e-3);
  EXPECT_NEAR(waited.at("ts").get<double>() + waited.at("dur").get<double>(),
              first.at("cuMemCreate").at(0).at("ts").get<double>() + create_us, 0.5)
      << "until the first thread's call ended";
  EXPECT_NEAR(called.at("ts").get<double>(), waited.at("ts").get<double>() + waited.at("dur").get<double>(), 1e-3);
  EXPECT_NEAR(called.at("dur").get<double>(), create_us, 0.5);
  // The trainer: a launch issued, then a wait for its 1 ms kernel.
  const auto& trainer = spans[lane_of["trainer"]];
  ASSERT_TRUE(trainer.count("issue") && trainer.count("device wait")) << timeline.dump(1);
  EXPECT_NEAR(trainer.at("issue").back().at("dur").get<double>(), 3.0, 1e-3) << "a launch costs 3 µs";
  EXPECT_NEAR(trainer.at("device wait").back().at("dur").get<double>(), 1000.0, 1e-3)
      << "the synchronisation waited for the kernel issued with it";
  // A handoff that says what it waited for is named so.
  ASSERT_EQ(trainer.count("another thread's lock"), 1u) << timeline.dump(1);
  EXPECT_NEAR(trainer.at("another thread's lock").at(0).at("dur").get<double>(), 500.0, 1e-3);
  bool kernel_seen = false;
  for (const json& x : events(timeline, "X")) {
    if (x.at("name") == "timeline_file_1ms") {
      kernel_seen = true;
      EXPECT_EQ(x.at("args").at("thread").get<int>() + 1, lane_of["trainer"]) << "issued by the trainer's thread";
    }
  }
  EXPECT_TRUE(kernel_seen);
}

TEST(TimelineFile, MalformedBoundStopsAtInit) {
  EXPECT_EQ(run_child("init", {"VGPUSIM_TIMELINE=/dev/null", "VGPUSIM_TIMELINE_MAX_EVENTS=lots"}), 2);
}

TEST(TimelineFile, NoFileUnlessAsked) {
  const std::string path = scratch("unasked.json");
  ASSERT_EQ(run_child("overlap", {"TIMES_PATH=" + path}), 0);
  std::remove((path + ".times").c_str());
  EXPECT_FALSE(std::ifstream(path).good());
}

// ---- child scenarios (exit 0 on success) -------------------------------------------------
// Where the child notes its simulated times: beside the timeline.
void write_times(const json& times) {
  const char* path = std::getenv("VGPUSIM_TIMELINE");
  if (path == nullptr || *path == '\0') path = std::getenv("TIMES_PATH");
  std::ofstream(std::string(path) + ".times") << times.dump();
}

int child_overlap() {
  CUcontext ctx = nullptr;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 10;
  CUfunction kernel = register_kernel("timeline_file_1ms", nothing, {}, 1'000'000);
  CUdeviceptr in = 0, out = 0;
  void *pinned_in = nullptr, *pinned_out = nullptr;
  if (cuMemAlloc(&in, kLinkBytes) || cuMemAlloc(&out, kLinkBytes) || cuMemHostAlloc(&pinned_in, kLinkBytes, 0) ||
      cuMemHostAlloc(&pinned_out, kLinkBytes, 0)) {
    return 11;
  }
  if (cuMemsetD8(in, 1, kLinkBytes) || cuMemsetD8(out, 2, kLinkBytes) || cuCtxSynchronize()) return 12;
  CUstream streams[3] = {};
  for (CUstream& s : streams) {
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) return 13;
  }
  const unsigned long long issued = vgpusimHostTimeNs();
  if (launch(kernel, streams[0], {}) || cuMemcpyHtoDAsync(in, pinned_in, kLinkBytes, streams[1]) ||
      cuMemcpyDtoHAsync(pinned_out, out, kLinkBytes, streams[2])) {
    return 14;
  }
  if (cuCtxSynchronize()) return 15;
  write_times({{"issued_ns", issued}});
  return 0;
}

int child_queued() {
  CUcontext ctx = nullptr;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 10;
  CUdeviceptr a = 0, b = 0;
  void* pinned = nullptr;
  if (cuMemAlloc(&a, kLinkBytes) || cuMemAlloc(&b, kLinkBytes) || cuMemHostAlloc(&pinned, kLinkBytes, 0)) return 11;
  CUstream streams[2] = {};
  for (CUstream& s : streams) {
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) return 13;
  }
  const unsigned long long issued = vgpusimHostTimeNs();
  if (cuMemcpyHtoDAsync(a, pinned, kLinkBytes, streams[0]) || cuMemcpyHtoDAsync(b, pinned, kLinkBytes, streams[1])) {
    return 14;
  }
  if (cuCtxSynchronize()) return 15;
  write_times({{"issued_ns", issued}});
  return 0;
}

int child_create_map_release() {
  CUcontext ctx = nullptr;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 10;
  const CUmemAllocationProp prop = device_memory();
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr va = 0;
  if (cuMemAddressReserve(&va, 64 * kMiB, 0, 0, 0)) return 11;
  json times;
  times["created_ns"] = vgpusimHostTimeNs();
  if (cuMemCreate(&handle, 64 * kMiB, &prop, 0)) return 12;
  times["mapped_ns"] = vgpusimHostTimeNs();
  if (cuMemMap(va, 64 * kMiB, 0, handle, 0)) return 13;
  times["unmapped_ns"] = vgpusimHostTimeNs();
  if (cuMemUnmap(va, 64 * kMiB)) return 14;
  times["released_ns"] = vgpusimHostTimeNs();
  if (cuMemRelease(handle)) return 15;
  times["after_ns"] = vgpusimHostTimeNs();
  write_times(times);
  return cuMemAddressFree(va, 64 * kMiB) == CUDA_SUCCESS ? 0 : 16;
}

// Two threads' 2 MiB cuMemCreate at the same simulated time, the second
// asked once the first holds the driver's lock; then the main thread
// ("trainer") launches a 1 ms kernel and waits for it.
int child_host_lanes() {
  CUcontext ctx = nullptr;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 10;
  ::pthread_setname_np(::pthread_self(), "trainer");
  CUfunction kernel = register_kernel("timeline_file_1ms", nothing, {}, 1'000'000);
  const CUmemAllocationProp prop = device_memory();
  std::mutex mutex;
  std::condition_variable changed;
  int stage = 0;  // 1: the second thread's clock is set; 2: the first's call is made
  json times;
  CUresult first_result = CUDA_ERROR_UNKNOWN, second_result = CUDA_ERROR_UNKNOWN;
  CUmemGenericAllocationHandle first_handle = 0, second_handle = 0;
  std::thread second([&] {
    ::pthread_setname_np(::pthread_self(), "vmm-second");
    std::unique_lock lock(mutex);
    times["second_before_ns"] = vgpusimHostTimeNs();  // its clock starts here, before the first's call
    stage = 1;
    changed.notify_all();
    changed.wait(lock, [&] { return stage == 2; });
    second_result = cuMemCreate(&second_handle, 2 * kMiB, &prop, 0);
  });
  std::thread first([&] {
    ::pthread_setname_np(::pthread_self(), "vmm-first");
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return stage == 1; });
    first_result = cuMemCreate(&first_handle, 2 * kMiB, &prop, 0);
    stage = 2;
    changed.notify_all();
  });
  first.join();
  second.join();
  if (first_result || second_result) return 11;
  CUstream stream = nullptr;
  if (cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING)) return 12;
  if (launch(kernel, stream, {}) || cuStreamSynchronize(stream)) return 13;
  vgpusimHostHandoffFor(vgpusimHostTimeNs() + 500'000, "another thread's lock");
  write_times(times);
  return cuMemRelease(first_handle) || cuMemRelease(second_handle) ? 14 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  g_self = argv[0];
  if (argc == 3 && std::string(argv[1]) == "--child") {
    const std::string name = argv[2];
    if (name == "overlap") return child_overlap();
    if (name == "create_map_release") return child_create_map_release();
    if (name == "queued") return child_queued();
    if (name == "host_lanes") return child_host_lanes();
    if (name == "init") return cuInit(0) == CUDA_SUCCESS ? 0 : 1;
    return 99;
  }
  setenv("VGPUSIM_DEVICE_MEMORY", "1GiB", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
