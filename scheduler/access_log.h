// The access log: the scheduler's end of the pager's access feed.
//
// Each program thread that launches gets its own log (made on its first
// operation, the only allocation): an iteration detector over the
// operations' execution identities and, once that has locked, a record of
// each whole iteration — every operation in issue order with the units it
// touched and its stream. A finished iteration is published for the
// planner (one uncontended lock per iteration, never per operation); an
// iteration that breaks before it ends is dropped.
//
// accessed() runs on the launch path: it takes no lock and allocates
// nothing once the thread's buffers have grown to an iteration's size.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "scheduler/iteration_detector.h"
#include "vmm/access_feed.h"

namespace vgpumem::scheduler {

// One operation of a recorded iteration.
struct RecordedOp {
  std::uint64_t identity = 0;
  CUfunction function = nullptr;  // null for a copy, memset or stream memory operation
  const char* api = "";
  std::uint64_t stream_bit = 0;
  std::uint32_t first_unit = 0, unit_count = 0;  // range in RecordedIteration::units
};

// One whole iteration, as the detector delimited it: ops[0] is the
// operation after the one that ended the previous iteration.
struct RecordedIteration {
  std::vector<RecordedOp> ops;
  std::vector<const vmm::Unit*> units;  // units never go away (vmm/unit.h): safe to keep
  std::uint64_t serial = 0;             // 1 for the first published on its thread, and so on
};

class AccessLog final : public vmm::AccessFeed {
 public:
  struct Options {
    IterationDetector::Options detector;
    std::size_t max_units_per_iteration = std::size_t{1} << 20;  // longer iterations are not recorded
  };
  explicit AccessLog(Options options);
  AccessLog() : AccessLog(Options{}) {}
  ~AccessLog() override;
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  void accessed(const vmm::AccessRecord& record) noexcept override;

  // The last whole iteration recorded on the thread that has recorded most
  // (the training loop's), or null if none has been.
  std::shared_ptr<const RecordedIteration> last_iteration() const;

  // {"threads", "operations", "period", "iterations", "locked",
  //  "iterations_recorded", "locks", "breaks", "dropped_iterations"} over
  // every thread; `period` (in operations), `iterations` (whole ones seen
  // alike) and `locked` (whether that period still holds) are those of the
  // thread of last_iteration(), as of its last lock.
  nlohmann::json summary() const;

 private:
  struct ThreadLog;
  ThreadLog& thread_log();
  static void start_iteration(ThreadLog& log);
  static void publish(ThreadLog& log);
  ThreadLog* busiest() const;

  const Options options_;
  mutable std::mutex threads_mutex_;  // taken when a thread makes its log, and by readers
  std::vector<std::unique_ptr<ThreadLog>> threads_;
};

}  // namespace vgpumem::scheduler
