// The access log: the scheduler's end of the pager's access feed.
//
// Each CUDA stream the program launches on gets its own log (made the first
// time the stream is seen, the only allocation): an iteration detector over
// the operations' execution identities and, once that has locked, a record
// of each whole iteration it keeps (the timed ones, or every one:
// Options::record_untimed) — every operation in issue order with the units
// it touched; every whole iteration is numbered, kept or not. A finished
// iteration is published for the planner (one uncontended lock per
// iteration, never per operation); an iteration that breaks before it ends
// is dropped.
//
// Keyed by stream, not by host thread: a framework issues one training step
// to one stream from several threads (PyTorch's forward and optimizer from
// the training loop's thread, its backward from the autograd engine's), and
// the step is the stream's sequence of operations, whichever thread issued
// each. Streams are told apart by the pager's bit for them
// (vmm::StreamRegistry): a named stream's log is found by its bit. The
// unnamed bit stands for every thread's own per-thread default stream (and
// for streams past the registry's table), which no other thread can issue
// to: those operations go to a log of the calling thread's, as before.
//
// Two threads may legally issue to one stream at once. The thread that
// follows an operation takes the stream's log for it (one atomic exchange,
// uncontended but for that case); a thread that finds it taken does not
// wait: its operation goes unseen, and the log's holder breaks the stream's
// iteration for it (an unseen operation is unlike any other). That costs a
// relearning, time, never bytes: nothing depends on the plan for
// correctness.
//
// accessed() runs on the launch path: it takes no lock that it waits for
// and allocates nothing once the stream's buffers have grown to an
// iteration's size.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "scheduler/iteration_detector.h"
#include "vmm/access_feed.h"
#include "vmm/pager_control.h"

// Note [An access log per stream]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Access log (`scheduler/access_log.{h,cpp}`): a detector per CUDA
// stream, keyed by the pager's bit for the stream (`vmm/stream_registry.h`),
// not by host thread: PyTorch issues forward and the optimizer from the
// training loop's thread and backward from its autograd engine's, all on
// one stream, and the step is the stream's sequence whichever thread issued
// each operation (keyed by thread, such a step was two unrelated half-steps:
// the plan covered forward and the optimizer and backward ran on demand;
// cnn-small at a 16th, half its peak, with `--backward-thread`: a period of
// 23 operations of its 43). A named stream's log is found by its bit in an
// array (no lookup, no allocation after its first sight). The unnamed bit
// stands for each thread's per-thread default stream (which no other thread
// can issue to) and for streams past the registry's 63: those keep a log
// per thread, as before, since that bit cannot say which stream it was.
// The thread that follows an operation takes its stream's log for it (one
// uncontended atomic exchange, `FollowedStream::held`) and gives it back
// once the scheduler has counted it; two threads that issue to one stream
// at once (legal, rare) never write the log together: the one that finds
// it taken does not wait, its operation goes unseen (counted,
// `schedule.unseen_operations`), and the holder breaks the stream's
// iteration for it (what it follows is no longer the stream's sequence) —
// a relearning, time, never bytes (test
// `AccessLog.ConcurrentThreadsOnOneStreamAreSafe`, under ThreadSanitizer).
// Operations issued by another thread than the one before on the same
// stream are counted (`schedule.handoffs`: two a step for a backward
// thread). Once locked, each whole iteration is followed and numbered, and
// the timed ones are recorded (operations in issue order, their units and
// streams) and published. The first iteration after each lock, and every
// 256th after it (or one the planner asks for: `request_timing`, which
// names an iteration by its number among all those followed), is timed:
// every operation of it, so the planner has each operation's device time
// and the stall before it from one step (by CUPTI or by events: *Where
// durations come from*). The planner reads nothing else, so the
// scheduler's log does not write the untimed iterations down
// (`Options::record_untimed`, on in the log's own tests): between two
// timed steps an operation costs the log its detector's step and a count,
// where a copy of its record and units into the iteration's buffers was
// the largest share of what the feed added to a launch
// (docs/journal/2026-11-25-benchmarks.md#the-access-feed-and-the-schedule-on-the-launch-path).
// A timed iteration stays published
// until the planner has read it: the untimed ones that end meanwhile are
// dropped, not published over it, since a planner off the CPU or still
// refining the last plan for a step would otherwise lose it and wait 256
// steps for the next (seen in CI under load: a run that never planned). The
// planner reads all of a step's marks in one call
// (`PagerControl::elapsed_ns` over every pair: one context switch, a wait
// only for a mark not yet reached). On the launch path the log looks
// up the stream's log once, keeps its counts as stores by the one writer
// that holds it, and the detector keeps its phase as it goes (no division).
// The common case — an untimed operation of an iteration being followed —
// is inline in the scheduler's `accessed` (`AccessLog::follow`: the
// exchange that takes the stream's log, the detector's step and a count,
// over the part of the stream's log declared in the header,
// `FollowedStream`); a lock, a break, a timed step, an iteration's end or
// a change of issuing thread go out of line. For each whole iteration of
// the stream the planner reads, the trace keeps the operations the plan in
// force followed and strayed from (`schedule.recent_iterations`, the last
// eight). The pager fills the operation's
// `AccessRecord` in place inside its `Access` as the operation is
// prepared (the record is a trivial struct, so an operation no feed hears
// of never zeroes it) and hands it over by reference.

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
  std::uint64_t serial = 0;       // 1 for the first whole iteration on its stream (kept or not), and so on
  bool timed = false;             // its operations carry timing marks (the log releases them)
  const void* log = nullptr;      // the stream's log it came from (StreamPosition::log)
  std::uint64_t lock = 0;         // the step kind it is of (IterationDetector::kind)
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

// Counts a stream's launch path keeps for the log's consumer (the
// scheduler: operations that followed the plan, or strayed from it). One
// writer at a time, whichever thread holds the stream's log, so a count is
// a load and a store, never a read-modify-write: a locked instruction on
// every launch costs more than the rest of the feed's bookkeeping. Anyone
// may read them.
struct StreamCounts {
  std::atomic<std::uint64_t> followed{0}, strayed{0};
  static void bump(std::atomic<std::uint64_t>& count) {
    count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
};

// What a stream's log reads and writes on every operation it follows: the
// part of it the launch path keeps inline (AccessLog::follow). Written only
// by the thread holding it (`held`), but `operations`, `handoffs` and
// `counts`, which anyone may read.
struct FollowedStream {
  explicit FollowedStream(const IterationDetector::Options& detector_options) : detector(detector_options) {}

  // Taken for the length of one operation (AccessLog::follow, let_go): an
  // exchange that finds it taken means another thread is following an
  // operation of the same stream right now.
  std::atomic<bool> held{false};
  // Counts the operations that went unseen, each added by the thread that
  // found `held` taken; where it has grown past `missed_noted`, the
  // iteration being followed is not the stream's (the holder breaks it).
  std::atomic<std::uint64_t> missed{0};
  std::uint64_t missed_noted = 0;
  const void* writer = nullptr;  // the thread that issued the last operation (its vmm::FeedThreadSlot)
  IterationDetector detector;
  bool recording = false;  // from the operation after an iteration's end until `period` more
  bool timing = false;     // the iteration being recorded is timed
  bool keeping = false;    // its operations are written down (AccessLog::Options::record_untimed)
  std::size_t counted = 0; // operations of the iteration being followed, while not kept
  std::size_t period = 0;
  std::uint64_t lock_count = 0;
  std::uint64_t kind = 0;  // the step kind of the last lock (IterationDetector::kind): what plans are keyed by
  std::atomic<std::uint64_t> operations{0};  // stored, never read-modify-written
  std::atomic<std::uint64_t> handoffs{0};    // operations issued by another thread than the one before
  StreamCounts counts;
};

// Where an operation's stream stands once the log has followed it
// (AccessLog::follow). The stream's log stays taken until let_go().
struct StreamPosition {
  // The stream's log; null where the operation went unseen (another thread
  // held the log).
  FollowedStream* log = nullptr;
  bool locked = false;
  // The step kind locked on (IterationDetector::kind): the same each time
  // the stream comes back to it, so a plan made for it applies again.
  std::uint64_t lock = 0;
  std::size_t phase = 0;    // of the operation, as RecordedIteration::ops indexes it
  bool time_next = false;   // the stream's next operation is to be timed (wants_timing)
  // The operation locked the period or ended a whole iteration: let_go()
  // notes what the consumer counted up to it (AccessLog::summary's
  // "recent_iterations").
  bool boundary = false;
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

  // Returns whether the next operation on the record's stream is to be timed.
  bool accessed(const vmm::AccessRecord& record) noexcept override {
    const StreamPosition at = follow(record);
    let_go(at);
    return at.time_next;
  }
  // The kernel about to be launched on `stream_bit`'s stream is of a timed
  // iteration and timed by its launch id: whether it carries marks too. So
  // it does where a neighbour is not a kernel (the operation before it, or
  // the one after it as the last recorded iteration had it), and as the
  // first of an iteration (the wait before it runs from the end of the one
  // before): the waits between kernels and copies are timed by marks alone.
  bool marks_kernel_too(std::uint64_t stream_bit) noexcept override;
  // accessed(), and where the operation's stream stands after it: the
  // launch path's one call (the stream's log looked up once). Takes the
  // stream's log, which the caller gives back with let_go() once it has
  // counted the operation (StreamPosition::log->counts). Inline for an
  // untimed operation of an iteration being followed, nearly every one: an
  // exchange, a detector's step and a count; the rest goes out of line.
  StreamPosition follow(const vmm::AccessRecord& record) noexcept {
    FollowedStream& log = log_of(record);
    if (log.held.exchange(true, std::memory_order_acquire)) [[unlikely]] return unseen(log, record);
    if (record.thread_slot != log.writer || log.missed.load(std::memory_order_relaxed) != log.missed_noted)
        [[unlikely]] {
      changed_hands(log, record);
    }
    StreamCounts::bump(log.operations);
    const IterationDetector::Event event = log.detector.observe(record.identity);
    if (event == IterationDetector::Event::none && log.recording && !log.keeping && record.started == nullptr &&
        log.counted + 1 < log.period) [[likely]] {
      ++log.counted;
      return position_of(log);
    }
    return follow_otherwise(log, event, record);
  }
  // Gives the stream's log back (a position whose operation went unseen
  // holds nothing).
  void let_go(const StreamPosition& at) noexcept {
    if (at.log == nullptr) return;
    if (at.boundary) [[unlikely]] note_boundary(*at.log);
    at.log->held.store(false, std::memory_order_release);
  }
  // Whether the next operation on `stream_bit`'s stream is to be timed
  // (what accessed() answered for its last one); false while another
  // thread holds its log.
  bool wants_timing(std::uint64_t stream_bit) noexcept;
  // StreamCounts summed over every stream.
  std::uint64_t followed() const;
  std::uint64_t strayed() const;

  // The last whole iteration recorded on the stream that has recorded most
  // (the training loop's), or null if none has been. A timed iteration
  // stays the last until it has been read once: the untimed ones that end
  // meanwhile are not published.
  std::shared_ptr<const RecordedIteration> last_iteration() const;
  // Times an iteration of `log`'s stream (RecordedIteration::log) out of
  // turn: the one `skip` after the next to start, so that `skip` whole
  // iterations run first (a measurement of a plan just published: the one
  // in progress and the first under it are transitional). Returns the
  // serial it will be published with, 0 for no such log.
  std::uint64_t request_timing(const void* log, std::uint64_t skip);

  // {"streams" (named streams with a log), "unnamed_threads" (threads with
  //  a log of their unnamed streams), "operations", "handoffs" (operations
  //  issued by another thread than the one before on the same stream),
  //  "period", "iterations", "locked", "iterations_followed" (whole ones
  //  after a lock), "iterations_recorded" (of those, the ones kept and
  //  published), "locks", "breaks" (not counting the run's end: a last
  //  break with less than a step after it and no lock again, counted in
  //  "breaks_at_end" instead), "unseen_operations",
  //  "dropped_iterations", "kinds" (step kinds made), "kind_returns"
  //  (locks that came back to a known kind), "kinds_kept" (kinds known at
  //  the last lock), "recent_iterations"} over every log; `period`
  // (in operations), `iterations` (whole ones seen alike) and `locked`
  // (whether that period still holds) are those of the log of
  // last_iteration(), as of its last lock, and so are `recent_iterations`:
  // the last whole iterations it followed since it last made a kind (at
  // most kRecentIterations), each {"serial", "operations" (the stream's
  // since the entry before: the iteration's, and any between kinds),
  // "followed", "strayed"} as the consumer counted them.
  nlohmann::json summary() const;
  static constexpr std::size_t kRecentIterations = 8;

 private:
  struct StreamLog;
  static constexpr unsigned kNamedStreams = 63;  // vmm::StreamRegistry::kNamed: bit 63 is the unnamed one

  // The log of the record's stream: a named stream's by its bit, else the
  // calling thread's.
  FollowedStream& log_of(const vmm::AccessRecord& record) noexcept {
    const unsigned bit = static_cast<unsigned>(std::countr_zero(record.stream_bit));  // 64 for none
    if (bit < kNamedStreams) [[likely]] {
      if (FollowedStream* log = streams_[bit].load(std::memory_order_acquire)) [[likely]] return *log;
      return stream_log(bit);
    }
    const vmm::FeedThreadSlot* slot = record.thread_slot;
    return slot != nullptr && slot->owner == serial_ ? *static_cast<FollowedStream*>(slot->state)
                                                     : thread_log_for(record.thread_slot);
  }
  // A named stream's log, made on its first sight.
  FollowedStream& stream_log(unsigned bit);
  // The calling thread's log for its unnamed streams, where `slot` (the
  // launch path's for the thread, or null) does not name it yet; the slot
  // is made to name it.
  FollowedStream& thread_log_for(vmm::FeedThreadSlot* slot);
  StreamLog& thread_log();
  // The log of `stream_bit`'s stream, if it has one (the calling thread's
  // for the unnamed bit).
  StreamLog* find_log(std::uint64_t stream_bit);
  // follow() where another thread holds the stream's log.
  StreamPosition unseen(FollowedStream& log, const vmm::AccessRecord& record) noexcept;
  // follow() where the issuing thread is not the last one's, or an
  // operation went unseen since the last.
  void changed_hands(FollowedStream& log, const vmm::AccessRecord& record) noexcept;
  void start_iteration(StreamLog& log, const vmm::AccessRecord& last);
  void publish(StreamLog& log, const vmm::AccessRecord& last);
  // A timed iteration about to start after `last`: marks the end of `last`.
  void mark_before_first(RecordedIteration& iteration, const vmm::AccessRecord& last);
  void release_marks(RecordedIteration& iteration, std::size_t from = 0);
  void release_marks(const vmm::AccessRecord& record);
  void append(StreamLog& log, const vmm::AccessRecord& record);
  // The iteration being followed is not the stream's: dropped unkept.
  void drop_iteration(StreamLog& log);
  void note_boundary(FollowedStream& log) noexcept;
  void note_lock(StreamLog& log);
  // A timed recording begun where the next operation may start a kind
  // never timed, kept if that kind is named within kTentativeOps.
  void start_tentative(StreamLog& log, const vmm::AccessRecord& last);
  void adopt_tentative(StreamLog& log, const vmm::AccessRecord& record);
  // The recording in progress is dropped unpublished, not counted.
  void forget_iteration(StreamLog& log);
  static constexpr std::size_t kTentativeOps = 64;
  void note_break(StreamLog& log);
  static bool broke_at_end(const StreamLog& log);
  static StreamPosition position_of(FollowedStream& log) {
    return {&log, log.detector.locked(), log.kind, log.detector.phase(), log.recording && log.timing, false};
  }
  // follow() for everything but the inline case, `event` observed already.
  StreamPosition follow_otherwise(FollowedStream& log, IterationDetector::Event event,
                                  const vmm::AccessRecord& record) noexcept;
  StreamLog* busiest() const;

  const Options options_;
  vmm::PagerControl* const marks_;
  const std::uint64_t serial_;  // this log's, among every log the process makes (FeedThreadSlot::owner)
  std::array<std::atomic<FollowedStream*>, kNamedStreams> streams_{};  // a named stream's log by its bit
  mutable std::mutex logs_mutex_;  // taken when a log is made, and by readers
  std::vector<std::unique_ptr<StreamLog>> logs_;
  std::size_t thread_logs_ = 0;  // of logs_, those of a thread's unnamed streams
};

}  // namespace vgpumem::scheduler
