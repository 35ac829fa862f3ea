// The access feed: what each launch or copy touched, told to the scheduler
// from the launch path (Note [The access feed and execution identity], below).
//
// The pager calls the feed once per operation, on the program's thread,
// right after the work was enqueued and its units' holds were dropped
// (Access::release), so that the moves the feed fires may take them: a unit
// it names may move, or be freed and its Unit reused, during the call (Unit
// objects are kept for reuse, never deleted, so the pointers stay valid).
// The feed must take no lock that the launch path could wait on and
// allocate nothing in a steady state: it runs on every launch.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda.h>

#include "common/library_op.h"

// Note [The access feed and execution identity]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Once a launch or copy that names paged memory is enqueued, and its units'
// holds are dropped (`Access::release` lets them go before `Access::tell_feed`,
// so a move the feed fires may take them), the pager tells the feed its *execution identity* (the kernel or entry point,
// mixed with its paged operands as (unit ordinal, offset): the same kernel
// over the same buffers has the same identity every step, wherever the
// arena put them; scalars are left out, a seed or learning rate changes
// every step), its units, its stream, and — when the feed asked for timing —
// two events around the work, or, for a kernel the feed times by the kernel
// clock (its `times_kernels_by_launch_id()`, asked only of operations to be
// timed), the launch id its launcher pushed for CUPTI instead (see
// Note [Where durations come from] in scheduler/step_times.h). No lock, no allocation, no read-modify-write
// of a shared counter: a locked instruction costs a launch more than the
// rest of the feed's bookkeeping (measured, see
// docs/journal/2026-11-25-benchmarks.md). The feed answers each operation with
// whether the next one on its stream is to be timed; the pager keeps that
// answer per stream (a bit per named stream, which every thread issuing
// there reads; for the unnamed bit, a thread's own default stream, in the
// thread's launch state), so an operation costs the feed one virtual call.
// The identity's units are why a step whose placements alternate has a
// period of two steps: PyTorch's caching allocator, with the logits held
// by the training loop until the next step has taken its own, hands the
// next step's logits other blocks, and the step after that the first ones
// again (the layered trainer's `--allocator caching`: 1 of 14 activations
// moves). The identity keeps which allocation and offset each operand
// points into on purpose: without them the 24 layers of a transformer
// (the same kernels over the same shapes, each with its own weights) would
// be one period, and a plan names units, so it must be learned on the
// placements it is applied to. Two steps are then the shortest sequence
// that repeats exactly, and the plan made from a recording of both (every
// operation's own units in each) is followed at every step. The cost is
// time to the first plan — two periods to lock and one to record are four
// steps and two, against two and one — and a trial's measurements, a
// whole (two-step) iteration each; the planner, its trial and the timing
// count iterations, never steps, so nothing else changes (tests
// `Scheduler.AStepWhosePlacementsAlternateIsPlannedOverTwoStepsAndFollowedInEach`,
// `Scheduler.WhereNoPlanFitsATwoStepIterationIsMeasuredWhole`). The small
// CNN at a 16th of its sizes, with a backward thread and the caching
// allocator at half its peak: a period of 86 operations (two steps of 43),
// locked within the fifth step; no plan fits there (one operation's units,
// lent ones included, are 44.0 of the cap's 44.5 MB), and the trial of the
// four ways to run it, an iteration of two steps measured under each, was
// done by the 32nd step. Not done: an identity without placements
// (the kernel, its operands' sizes, the stream) and a plan per phase — a
// period of one step, but a plan learned on one step names that step's
// units, wrong in the next, so it needs a recording of each placement
// anyway (the same two steps, with more machinery), and such an identity
// makes a transformer's layer the period.

namespace vgpumem::vmm {

struct Unit;

// An operation's execution identity: the same kernel (or copy entry point)
// over the same buffers at the same offsets has the same identity in every
// iteration of a training loop. Paged words count as (unit ordinal, offset),
// so the identity does not depend on where the arena put a buffer; other
// words are left out, because scalars such as a random seed or a learning
// rate change every step without changing what the step touches.
class ExecutionIdentity {
 public:
  void mix(std::uint64_t value) { hash_ = (hash_ ^ value) * kPrime; }
  std::uint64_t value() const {  // avalanched: the detector hashes it into a table
    std::uint64_t h = hash_;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
  }
  void reset() { hash_ = kOffset; }

 private:
  static constexpr std::uint64_t kOffset = 0xcbf29ce484222325ULL;
  static constexpr std::uint64_t kPrime = 0x100000001b3ULL;
  std::uint64_t hash_ = kOffset;
};

// A feed's own state for one program thread, kept by the launch path beside
// its own (vmm::LaunchThread), so that an operation looks its thread up once
// for both: a thread_local of a preloaded library costs a call to find.
// `owner` is a serial the feed took for itself, never reused, so a slot a
// feed left behind is never taken for a later feed's.
struct FeedThreadSlot {
  std::uint64_t owner = 0;
  void* state = nullptr;
};

// What one operation touched, as the pager tells the feed. Trivial, so that
// the launch path fills it in place without zeroing it first
// (vmm::Access): one made anywhere else is value-initialized,
// `AccessRecord record{}` (every member zero, `api` null), and `api` set.
struct AccessRecord {
  std::uint64_t identity;
  CUstream stream;           // as the driver names it (0 and the per-thread stream told apart)
  std::uint64_t stream_bit;  // the pager's bit for the stream (StreamRegistry)
  CUfunction function;       // the kernel; null for a copy, memset or stream memory operation
  const char* api;           // the entry point the program called
  Unit* const* units;        // what it touched, each once (no longer held: see above)
  std::size_t count;
  int device;                // of the first unit
  // When the feed asked for timing (its answer to the thread's previous
  // operation): marks recorded on the stream just before the work (after
  // any wait for its units) and just after it, the feed's to give back
  // (PagerControl::release_mark). Null otherwise.
  CUevent started, ended;
  // A timed kernel the feed times off the stream instead (its
  // times_kernels_by_launch_id()): the id its launcher pushed for it
  // (Access::set_launch_id), which the kernel's record will carry; 0 for
  // none. Such a kernel has no marks.
  std::uint64_t launch_id;
  // Launched by a hooked library call (vmm/library_call_scope.h): what the
  // call does, which call it is (its serial; 0 outside any), and which of
  // `units` (bit i: units[i], the first 64) it overwrites whole.
  LibraryOp library_op;
  std::uint64_t library_call;
  std::uint64_t overwritten;
  std::uint64_t tick;  // the launch tick it left on its units (Unit::last_use)
  // The calling thread's slot for the feed (null: the feed finds its state
  // for the thread itself).
  FeedThreadSlot* thread_slot;
};

class AccessFeed {
 public:
  virtual ~AccessFeed() = default;
  // The operation is enqueued. Returns whether the next operation enqueued
  // on the record's stream is to be timed, whichever thread enqueues it:
  // the answer rides on this call (the pager keeps it per stream: a named
  // stream's where every thread finds it, the unnamed bit's for the calling
  // thread, whose own default stream that is) so that an operation costs
  // the feed one virtual call, not a second one to ask before it.
  virtual bool accessed(const AccessRecord& record) noexcept = 0;
  // Whether a kernel the feed asked to time is to be timed off the
  // program's stream, by the launch id its launcher pushes (a kernel clock
  // such as CUPTI's), rather than by two marks on its stream. Asked only of
  // operations to be timed, never on an untimed launch.
  virtual bool times_kernels_by_launch_id() const noexcept { return false; }
  // Whether the kernel about to be launched on the stream of `stream_bit`
  // (StreamRegistry), timed by its launch id, is to carry marks too: a wait
  // between a kernel and a copy beside it (which only marks time) is timed
  // by marks on both. Asked only of kernels to be timed by launch id.
  virtual bool marks_kernel_too(std::uint64_t /*stream_bit*/) noexcept { return false; }
};


}  // namespace vgpumem::vmm
