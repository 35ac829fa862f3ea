// Internal state of the simulated CUPTI: one process-wide object holding the
// subscriber, the enabled activity kinds, the client's buffer callbacks and
// the records waiting for a flush (docs/simulated-driver.md, "Simulated CUPTI").
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <variant>

#define CUPTI_SIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace vgpusim::cupti {

// A record as it will be copied into the client's buffer.
using Record = std::variant<CUpti_ActivityKernel10, CUpti_ActivityExternalCorrelation>;

struct State {
  static State& get();

  std::mutex mutex;  // everything below; never held while calling the client or the driver
  bool subscribed = false;
  CUpti_CallbackFunc callback = nullptr;
  void* callback_user = nullptr;
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  std::deque<Record> queued;
  std::uint64_t dropped = 0;

  // Read on the launch path (the kernel observer), without the mutex.
  // `driver_records`: DRIVER activity is enabled. The simulator records no
  // API calls, but as on the H200 an external-correlation record is made
  // only for a call whose API record is being made.
  std::atomic<bool> concurrent_kernel{false}, kernel{false}, external_correlation{false}, driver_records{false};
  // Driver-API callbacks for launches (cuLaunchKernel and its kin), enabled
  // one callback id at a time or with the whole driver domain.
  std::atomic<std::uint32_t> launch_callbacks{0};  // a bit per launch callback id (launch_callback_bit)
  std::atomic<bool> driver_domain{false};
  std::atomic<std::uint32_t> next_correlation{1};
};

// The bit of a launch's driver callback id in State::launch_callbacks; 0 for any other id.
std::uint32_t launch_callback_bit(CUpti_CallbackId id);
// Size of a record of `kind` in a buffer (0: a kind this CUPTI never writes).
std::size_t record_size(CUpti_ActivityKind kind);
// Records start 8-byte aligned, as the real CUPTI's do.
constexpr std::size_t kRecordAlignment = 8;
// Starts observing the simulated driver's kernels (once).
void attach_kernel_observer();
// Forgets enabled kinds, callbacks, queued records and the subscriber.
void reset(State& state);

}  // namespace vgpusim::cupti
