// The access log: the scheduler's end of the pager's access feed.
//
// Each program thread that launches gets its own log (made on its first
// operation, the only allocation): an iteration detector over the
// operations' execution identities and, once that has locked, a record of
// each whole iteration it keeps (the timed ones, or every one:
// Options::record_untimed) — every operation in issue order with the units
// it touched and its stream; every whole iteration is numbered, kept or
// not. A finished iteration is published for the planner (one uncontended
// lock per iteration, never per operation); an iteration that breaks
// before it ends is dropped.
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
#include "vmm/pager_control.h"

namespace vgpumem::scheduler {

// One operation of a recorded iteration.
struct RecordedOp {
  RecordedOp() = default;
  // From the operation's record, its units at `first_unit` of the
  // iteration's: every member set once, in place (the access log's append,
  // on the launch path: not zeroed first, a `rep stos` slow to start).
  RecordedOp(const vmm::AccessRecord& record, std::uint32_t first)
      : identity(record.identity),
        function(record.function),
        api(record.api),
        stream_bit(record.stream_bit),
        first_unit(first),
        unit_count(static_cast<std::uint32_t>(record.count)),
        device(record.device),
        started(record.started),
        ended(record.ended),
        launch_id(record.launch_id),
        library_op(record.library_op),
        library_call(record.library_call),
        overwritten(record.overwritten) {}

  std::uint64_t identity = 0;
  CUfunction function = nullptr;  // null for a copy, memset or stream memory operation
  const char* api = "";
  std::uint64_t stream_bit = 0;
  std::uint32_t first_unit = 0, unit_count = 0;  // range in RecordedIteration::units
  int device = 0;                                  // of its first unit
  CUevent started = nullptr, ended = nullptr;      // timing marks of a timed iteration (else null)
  std::uint64_t launch_id = 0;                     // or, for a kernel the kernel clock times, its id there (kernel_clock.h)
  LibraryOp library_op = LibraryOp::none;          // of the library call that launched it (vmm/access_feed.h)
  std::uint64_t library_call = 0;                  // that call's serial; 0 for none
  std::uint64_t overwritten = 0;                   // bit k: its k-th unit is overwritten whole (k < 64)
};

// One whole iteration, as the detector delimited it: ops[0] is the
// operation after the one that ended the previous iteration.
struct RecordedIteration {
  std::vector<RecordedOp> ops;
  std::vector<vmm::Unit*> units;  // units never go away (vmm/unit.h): safe to keep
  std::uint64_t serial = 0;       // 1 for the first whole iteration on its thread (kept or not), and so on
  bool timed = false;             // its operations carry timing marks (the log releases them)
  const void* thread = nullptr;   // the thread's log it came from
  std::uint64_t lock = 0;         // which lock of that thread's detector delimited it
  // A timed iteration's mark recorded on the stream of the operation before
  // ops[0] as that operation was enqueued (its end), so that the wait before
  // ops[0] is timed like every other: at a step's start the program may
  // wait for room its input needs. `event` null where none was recorded.
  struct Mark {
    CUevent event = nullptr;
    int device = 0;
    std::uint64_t stream_bit = 0;  // of that operation's stream
  };
  Mark before_first;
};

// Counts a thread's launch path keeps for the log's consumer (the
// scheduler: operations that followed the plan, or strayed from it). One
// writer, the thread itself, so a count is a load and a store, never a
// read-modify-write: a locked instruction on every launch costs more than
// the rest of the feed's bookkeeping. Anyone may read them.
struct ThreadCounts {
  std::atomic<std::uint64_t> followed{0}, strayed{0};
  static void bump(std::atomic<std::uint64_t>& count) {
    count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
};

// What a thread's log reads and writes on every operation it follows: the
// part of it the launch path keeps inline (AccessLog::follow). Written by
// the owning thread alone, but `operations` and `counts`, which anyone may
// read.
struct FollowedThread {
  explicit FollowedThread(const IterationDetector::Options& detector_options) : detector(detector_options) {}

  IterationDetector detector;
  bool recording = false;  // from the operation after an iteration's end until `period` more
  bool timing = false;     // the iteration being recorded is timed
  bool keeping = false;    // its operations are written down (AccessLog::Options::record_untimed)
  std::size_t counted = 0; // operations of the iteration being followed, while not kept
  std::size_t period = 0;
  std::uint64_t lock_count = 0;
  std::atomic<std::uint64_t> operations{0};  // stored, never read-modify-written
  ThreadCounts counts;
};

// Where the calling thread's stream stands (AccessLog::position).
struct StreamPosition {
  const void* thread = nullptr;
  bool locked = false;
  std::uint64_t lock = 0;   // counts the thread's locks: a new lock starts its phases afresh
  std::size_t phase = 0;    // of the last operation, as RecordedIteration::ops indexes it
  ThreadCounts* counts = nullptr;  // the thread's
  bool time_next = false;          // its next operation is to be timed (wants_timing)
};

class AccessLog final : public vmm::AccessFeed {
 public:
  struct Options {
    IterationDetector::Options detector;
    std::size_t max_units_per_iteration = std::size_t{1} << 20;  // longer iterations are not recorded
    // Operations of the first iteration recorded after each lock, and of
    // every timing_every-th after it, are timed (two marks each).
    std::uint64_t timing_every = 256;
    // Whether an untimed iteration is written down too. The planner reads
    // timed ones only (it needs each operation's duration), so the
    // scheduler's log keeps none other: between two timed iterations an
    // operation then costs the log its detector's step and a count, not a
    // copy of its record and units (the launch path's largest share).
    // Every whole iteration has its serial either way.
    bool record_untimed = true;
  };
  // `marks`: where timing marks come from and go back to; null for none.
  explicit AccessLog(Options options, vmm::PagerControl* marks = nullptr);
  AccessLog() : AccessLog(Options{}) {}
  ~AccessLog() override;
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  bool accessed(const vmm::AccessRecord& record) noexcept override { return follow(record).time_next; }
  // The operation the calling thread launches next is a kernel of a timed
  // iteration timed by its launch id: whether it carries marks too. So it
  // does where a neighbour is not a kernel (the operation before it, or the
  // one after it as the last recorded iteration had it), and as the first
  // of an iteration (the wait before it runs from the end of the one
  // before): the waits between kernels and copies are timed by marks alone.
  bool marks_kernel_too() noexcept override;
  // accessed(), and where the thread's stream stands after the operation:
  // the launch path's one call (the thread's log looked up once). Inline
  // for an untimed operation of an iteration being followed, nearly every
  // one: a detector's step and a count; the rest goes out of line.
  StreamPosition follow(const vmm::AccessRecord& record) noexcept {
    const vmm::FeedThreadSlot* slot = record.thread_slot;
    FollowedThread& log = slot != nullptr && slot->owner == serial_ ? *static_cast<FollowedThread*>(slot->state)
                                                                     : followed_thread(record.thread_slot);
    ThreadCounts::bump(log.operations);
    const IterationDetector::Event event = log.detector.observe(record.identity);
    if (event == IterationDetector::Event::none && log.recording && !log.keeping && record.started == nullptr &&
        log.counted + 1 < log.period) [[likely]] {
      ++log.counted;
      return position_of(log);
    }
    return follow_otherwise(log, event, record);
  }
  // Whether the operation the calling thread enqueues next is to be timed
  // (what accessed() answered for its last one).
  bool wants_timing() noexcept;
  // The calling thread's, after its last operation.
  StreamPosition position();
  // ThreadCounts summed over every thread.
  std::uint64_t followed() const;
  std::uint64_t strayed() const;

  // The last whole iteration recorded on the thread that has recorded most
  // (the training loop's), or null if none has been. A timed iteration
  // stays the last until it has been read once: the untimed ones that end
  // meanwhile are not published.
  std::shared_ptr<const RecordedIteration> last_iteration() const;
  // Times an iteration of `thread`'s log (RecordedIteration::thread) out of
  // turn: the one `skip` after the next to start, so that `skip` whole
  // iterations run first (a measurement of a plan just published: the one
  // in progress and the first under it are transitional). Returns the
  // serial it will be published with, 0 for no such thread.
  std::uint64_t request_timing(const void* thread, std::uint64_t skip);

  // {"threads", "operations", "period", "iterations", "locked",
  //  "iterations_followed" (whole ones after a lock), "iterations_recorded"
  //  (of those, the ones kept and published), "locks", "breaks",
  //  "dropped_iterations"} over
  // every thread; `period` (in operations), `iterations` (whole ones seen
  // alike) and `locked` (whether that period still holds) are those of the
  // thread of last_iteration(), as of its last lock.
  nlohmann::json summary() const;

 private:
  struct ThreadLog;
  ThreadLog& thread_log();
  // The calling thread's log, where `slot` (the launch path's for the
  // thread, or null) does not name it yet; the slot is made to name it.
  FollowedThread& followed_thread(vmm::FeedThreadSlot* slot);
  void start_iteration(ThreadLog& log, const vmm::AccessRecord& last);
  void publish(ThreadLog& log, const vmm::AccessRecord& last);
  // A timed iteration about to start after `last`: marks the end of `last`.
  void mark_before_first(RecordedIteration& iteration, const vmm::AccessRecord& last);
  void release_marks(RecordedIteration& iteration, std::size_t from = 0);
  void release_marks(const vmm::AccessRecord& record);
  void append(ThreadLog& log, const vmm::AccessRecord& record);
  static StreamPosition position_of(FollowedThread& log) {
    return {&log, log.detector.locked(), log.lock_count, log.detector.phase(), &log.counts,
            log.recording && log.timing};
  }
  // follow() for everything but the inline case, `event` observed already.
  StreamPosition follow_otherwise(FollowedThread& log, IterationDetector::Event event,
                                  const vmm::AccessRecord& record) noexcept;
  ThreadLog* busiest() const;

  const Options options_;
  vmm::PagerControl* const marks_;
  const std::uint64_t serial_;  // this log's, among every log the process makes (FeedThreadSlot::owner)
  mutable std::mutex threads_mutex_;  // taken when a thread makes its log, and by readers
  std::vector<std::unique_ptr<ThreadLog>> threads_;
};

}  // namespace vgpumem::scheduler
