// The units one launch or copy touches, held from the moment they are found
// until the work is enqueued: each holds one count of its unit's
// `launching`, and a unit with any count is no victim for an offload. So
// making unit k resident can never evict unit j of the same operation, and
// however many units an operation names, all of them are held (past the
// inline set they spill to a buffer the thread keeps, so a steady state
// allocates nothing).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda.h>

#include "vmm/access_feed.h"
#include "vmm/pager_control.h"
#include "vmm/stream_registry.h"
#include "vmm/table_lending.h"
#include "vmm/unit.h"

// Note [Holding an operation's units]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The launch path. An `Access` holds every
// unit one launch or copy names (one count of the unit's `launching` each,
// inline up to 32 and then in a buffer the thread lends it, so nothing is
// allocated in a steady state) until the work is enqueued; a held unit is
// no victim. When all are resident and ready for the stream, that is the
// whole cost; otherwise, under the pager's lock: an operation whose units
// exceed a device's cap is refused (out of memory, logged with the kernel's
// name), what is on the host comes back, and only then the stream is made
// to wait for what is still arriving. The lock is never held across the
// real launch. Where room cannot be made because other launches hold the
// rest of the cap (each between its check and its enqueue: their own
// units, and what they were lent), the slow path lets the lock go and
// tries again, backing off from 10 µs to 1 ms, for up to 50 ms before the
// program is told it is out of memory (the tries in between log nothing and
// count no out-of-memory). A kernel whose parameters cannot be read makes
// its whole device's paged set resident first.

namespace vgpumem::vmm {

class Pager;
struct LibraryCallScope;

// What the launch path keeps per program thread (launch_gate.cpp): looked
// up once per operation, so it holds everything the operation needs of it.
struct LaunchThread {
  std::uint32_t launches = 0;             // counts the thread's operations: its place in the LRU window
  // The feed that asked to time the next operation on the thread's unnamed
  // streams (its own default stream: a named stream's answer is the
  // pager's, for every thread, Access::keep_timing_answer).
  const AccessFeed* time_next = nullptr;
  LibraryCallScope* library_call = nullptr;  // the library call open on the thread (library_calls.cpp)
  FeedThreadSlot feed;                       // the feed's state for the thread
  // While the thread tells the feed of an operation (Access::release): its
  // stream's bit. That operation is enqueued, so the launch grace counts it
  // as done (LaunchGrace::protects).
  std::uint64_t enqueued_bit = 0;
  // Set by the pager when it could find no room (nothing it may evict) for
  // this thread's operation: the try that failed so is worth another once
  // other launches let their units go (Pager::settle).
  bool short_of_room = false;
};

// The calling thread's. Declared const, as the C library declares
// __errno_location: the address never changes on a thread, so a function
// that asks more than once makes one call. (GCC finds a thread_local of a
// shared library afresh, a call to __tls_get_addr, at every use.)
[[gnu::const]] LaunchThread& launch_thread();

// What an operation is, for the log when it cannot have what it names.
struct Operation {
  const char* api = "";            // the entry point the program called
  CUfunction function = nullptr;   // the kernel, for a launch
};

class Access {
 public:
  Access() = default;
  ~Access() { release(); }
  Access(const Access&) = delete;
  Access& operator=(const Access&) = delete;

  // Drops every hold (the work is enqueued, or was refused), then tells the
  // feed (if the operation was noted for one) what it touched: what the feed
  // does may move those units, as the scheduler's offload right behind a
  // unit's last use does (its copy waits for the work just enqueued).
  void release();
  // The units held, or about to be.
  std::size_t size() const { return count_; }
  // The operation is a kernel to be timed by its launch id (the feed's
  // times_kernels_by_launch_id()): the launcher pushes an id of its own
  // making around the launch and tells it here, for the feed's record.
  bool wants_launch_id() const { return wants_launch_id_; }
  void set_launch_id(std::uint64_t id) { record_.launch_id = id; }

 private:
  friend class Pager;
  static constexpr std::size_t kInline = 32;

  Unit** data() { return spilled_ ? spill_.data() : inline_; }
  Unit* at(std::size_t i) const { return spilled_ ? spill_[i] : inline_[i]; }
  // Appends `unit`, not yet held, unless it is the last one added or, while
  // the inline set holds everything, already there.
  void add(Unit* unit);
  // Units [from, size()) once each (a spilled range is sorted and uniqued;
  // a duplicate of an earlier operand's unit only holds twice, harmlessly).
  void drop_duplicates_from(std::size_t from);
  // Holds every unit added since the last call.
  void hold_new();
  // Lets go of units [from, size()) (lent units that cannot fit beside the
  // operation's own).
  void drop_from(std::size_t from);
  // release() for a noted operation: completes the record and hands it
  // over (an operation that touched nothing gives its mark back).
  void tell_feed();
  // The feed's answer for the operation's stream (time its next one?),
  // kept where that next operation looks for it.
  void keep_timing_answer(bool time_next);
  // A paged word or operand at `offset` into `unit`, for the identity.
  void mix_operand(const Unit* unit, std::uint64_t offset) {
    identity_.mix((std::uint64_t{unit->ordinal} << 8) ^ static_cast<std::uint64_t>(unit->device));
    identity_.mix(offset);
  }
  // The operation is timed: `started` was recorded before it, and release()
  // records its end through `marks`.
  void time(PagerControl* marks, CUevent started) {
    marks_ = marks;
    record_.started = started;
  }
  // The operation is timed by its launch id, not by marks.
  void time_by_launch_id() { wants_launch_id_ = true; }
  // Whether the operation is timed already, one way or the other (asked
  // only of a noted operation).
  bool timed() const { return record_.started != nullptr || wants_launch_id_; }
  // The operation is noted: release() tells `feed` about it, and keeps
  // the feed's answer (time the next one?) in `thread`. `tick`: the launch
  // tick it leaves on its units. Called once for each range the operation
  // settles (a copy's two operands): the first begins the record, and a
  // mark already recorded for it stays.
  // `streams_to_time`: the named streams whose next operation the feed
  // wants timed (the pager's), which its answer updates.
  void note(AccessFeed* feed, CUstream stream, std::uint64_t bit, std::uint64_t tick, const Operation& op,
            LaunchThread& thread, std::atomic<std::uint64_t>& streams_to_time) {
    if (feed_ == nullptr) {
      record_.started = nullptr;
      record_.launch_id = 0;
    }
    feed_ = feed;
    thread_ = &thread;
    streams_to_time_ = &streams_to_time;
    record_.stream = stream;
    record_.stream_bit = bit;
    record_.function = op.function;
    record_.api = op.api;
    record_.tick = tick;
    record_.thread_slot = &thread.feed;  // the rest by tell_feed()
  }

  Unit* inline_[kInline];  // NOLINT: read up to count_ only (zeroing it would cost every launch)
  std::vector<Unit*> spill_;  // everything, once past kInline: the thread's buffer, lent
  bool spilled_ = false;
  std::size_t count_ = 0;
  std::size_t held_ = 0;  // [0, held_) each hold one count of `launching`
  ExecutionIdentity identity_;
  AccessFeed* feed_ = nullptr;
  LaunchThread* thread_ = nullptr;
  std::atomic<std::uint64_t>* streams_to_time_ = nullptr;
  PagerControl* marks_ = nullptr;
  bool wants_launch_id_ = false;
  // What the feed is told: begun by note(), filled in as the operation is
  // prepared (its marks, its launch id) and completed by tell_feed(), then
  // handed over in place, never built aside and copied. Left as it is
  // where no feed hears of the operation (zeroing it would cost every
  // paged launch under on-demand paging): read only while `feed_` is set.
  AccessRecord record_;
  // What the operation's words named, for lending (vmm/table_lending.h):
  // begun empty, filled by Pager::add_named_by_words, kept by settle().
  TableLending::Names names_;
};

}  // namespace vgpumem::vmm
