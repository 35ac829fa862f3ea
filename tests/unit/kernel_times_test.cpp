// cupti::KernelTimes against the simulated CUPTI and driver: durations equal
// the simulated clock's, an absent library and a CUPTI held by another
// subscriber are reported as such (and nothing of ours is enabled), a library
// that refuses to subscribe is absent with its error, and after
// step_aside() another party subscribes and gets all of its own records.
#include <gtest/gtest.h>

#include <cupti.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cupti/kernel_times.h"
#include "cupti_test_support.h"

namespace {

using vgpumem::cupti::KernelTime;
using vgpumem::cupti::KernelTimes;
using vgpumem::cupti::KernelTimesOptions;
using vgpumem::cupti::TimerState;

// The other party's records (a profiler with buffer callbacks of its own).
std::vector<std::uint64_t> g_their_durations;
void their_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, 1 << 16));
  *size = 1 << 16;
  *max_records = 0;
}
void their_buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      g_their_durations.push_back(kernel->end - kernel->start);
    }
  }
  free(buffer);
}

class KernelTimesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuptiFinalize(), CUPTI_SUCCESS);
    g_their_durations.clear();
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    CUdevice device = 0;
    ASSERT_EQ(cuDeviceGet(&device, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&context_, device), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
  }
  void TearDown() override { cuptiFinalize(); }

  static void launch(CUfunction f) { ASSERT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS); }
  static void timed_launch(KernelTimes& times, std::uint64_t id, CUfunction f) {
    times.begin(id);
    launch(f);
    times.end();
  }
  static std::map<std::uint64_t, std::uint64_t> durations_by_id(KernelTimes& times) {
    std::map<std::uint64_t, std::uint64_t> durations;
    times.drain([&](const KernelTime& t) { durations[t.external_id] = t.end_ns - t.start_ns; });
    return durations;
  }
  CUcontext context_ = nullptr;
};

TEST_F(KernelTimesTest, DurationsAreTheSimulatedClocks) {
  KernelTimes times(test_cupti_options());
  ASSERT_EQ(times.start(), TimerState::active);
  CUfunction conv = simulated_kernel("times_conv", 12500), relu = simulated_kernel("times_relu", 800);
  timed_launch(times, 1, conv);
  timed_launch(times, 2, relu);
  launch(relu);  // not timed: counted, not attributed
  timed_launch(times, 3, conv);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  times.flush();
  const auto durations = durations_by_id(times);
  EXPECT_EQ(durations, (std::map<std::uint64_t, std::uint64_t>{{1, 12500}, {2, 800}, {3, 12500}}));
  EXPECT_EQ(times.kernel_records(), 4u);
  EXPECT_EQ(times.unattributed_records(), 1u);
  EXPECT_TRUE(durations_by_id(times).empty()) << "drained once";
}

TEST_F(KernelTimesTest, AbsentLibraryIsReportedAbsent) {
  KernelTimesOptions options = test_cupti_options();
  options.library_path = "/nonexistent/libcupti.so.13";
  KernelTimes times(options);
  EXPECT_EQ(times.start(), TimerState::absent);
  EXPECT_NE(times.absent_reason().find("/nonexistent/libcupti.so.13"), std::string::npos) << times.absent_reason();
  times.begin(1);  // harmless
  times.end();
  times.flush();
  EXPECT_EQ(times.kernel_records(), 0u);
}

TEST_F(KernelTimesTest, AnotherSubscriberFirstMeansTakenAndNothingOfOursEnabled) {
  CUpti_SubscriberHandle theirs = nullptr;
  ASSERT_EQ(cuptiSubscribe(&theirs, nullptr, nullptr), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiActivityRegisterCallbacks(their_buffer_requested, their_buffer_completed), CUPTI_SUCCESS);
  KernelTimes times(test_cupti_options());
  EXPECT_EQ(times.start(), TimerState::taken);
  // Nothing of ours: no kernel activity enabled, their callbacks still registered.
  CUfunction f = simulated_kernel("times_taken", 300);
  timed_launch(times, 9, f);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_EQ(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_TRUE(g_their_durations.empty()) << "kernel activity was enabled by someone";
  EXPECT_EQ(times.kernel_records(), 0u);
  EXPECT_EQ(cuptiUnsubscribe(theirs), CUPTI_SUCCESS);
}

// A libcupti that loads but refuses cuptiSubscribe for its own reasons (a
// driver it does not support, missing privileges): absent, with its error,
// not "held by another subscriber" -- no profiler is involved.
CUptiResult subscribe_without_privileges(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) {
  return CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
}
void* lookup_refusing_subscribe(void* handle, const char* name) {
  if (std::string_view(name) == "cuptiSubscribe") return reinterpret_cast<void*>(&subscribe_without_privileges);
  return glibc_dlsym(handle, name);
}

TEST_F(KernelTimesTest, SubscribeFailingForItsOwnReasonIsAbsentWithTheError) {
  KernelTimesOptions options = test_cupti_options();
  options.lookup = &lookup_refusing_subscribe;
  KernelTimes times(options);
  EXPECT_EQ(times.start(), TimerState::absent);
  const std::string& why = times.absent_reason();
  EXPECT_NE(why.find("cuptiSubscribe"), std::string::npos) << why;
  EXPECT_NE(why.find(std::to_string(static_cast<int>(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES))), std::string::npos) << why;
  // Nothing of ours holds CUPTI: a profiler can still subscribe.
  CUpti_SubscriberHandle theirs = nullptr;
  EXPECT_EQ(cuptiSubscribe(&theirs, nullptr, nullptr), CUPTI_SUCCESS);
  EXPECT_EQ(cuptiUnsubscribe(theirs), CUPTI_SUCCESS);
}

TEST_F(KernelTimesTest, AfterSteppingAsideAnotherPartySubscribesAndGetsAllItsRecords) {
  KernelTimes times(test_cupti_options());
  ASSERT_EQ(times.start(), TimerState::active);
  CUfunction f = simulated_kernel("times_handover", 2000), g = simulated_kernel("times_handover_2", 3000);
  timed_launch(times, 1, f);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  times.step_aside();
  EXPECT_EQ(times.state(), TimerState::stepped_aside);
  EXPECT_EQ(times.kernel_records(), 1u) << "flushed on the way out";
  EXPECT_EQ(durations_by_id(times), (std::map<std::uint64_t, std::uint64_t>{{1, 2000}}));

  CUpti_SubscriberHandle theirs = nullptr;
  ASSERT_EQ(cuptiSubscribe(&theirs, nullptr, nullptr), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiActivityRegisterCallbacks(their_buffer_requested, their_buffer_completed), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
  timed_launch(times, 2, g);  // begin() is a no-op now
  launch(f);
  timed_launch(times, 3, g);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_EQ(cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(g_their_durations, (std::vector<std::uint64_t>{3000, 2000, 3000}));
  EXPECT_EQ(times.kernel_records(), 1u);
  EXPECT_EQ(times.start(), TimerState::stepped_aside) << "final";
  EXPECT_EQ(cuptiUnsubscribe(theirs), CUPTI_SUCCESS);
}

TEST_F(KernelTimesTest, OnlyOneInstanceHoldsCupti) {
  KernelTimes first(test_cupti_options());
  ASSERT_EQ(first.start(), TimerState::active);
  KernelTimes second(test_cupti_options());
  EXPECT_EQ(second.start(), TimerState::taken);
}

}  // namespace
