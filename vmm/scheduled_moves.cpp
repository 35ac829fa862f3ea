// The pager's side of the scheduler's interface (vmm/pager_control.h): a
// unit moved on request, ahead of need, through the same offload and fetch
// the on-demand path uses, under the pager's lock; and timing marks.
#include "vmm/context_scope.h"
#include "vmm/pager.h"
#include "vmm/pager_device_state.h"
#include "vmm/relaxed_capture_mode.h"

#include <optional>

// Note [The mover on the simulated clock]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// On the simulated driver each thread has its own clock, and a thread that
// takes over another's work must not do it in the simulated past: the shim
// finds `vgpusimHostTimeNs`/`vgpusimHostHandoff` in the simulated driver
// (`DriverOps::host_time_ns`, null on hardware), stamps each move with the
// poster's time and moves the mover's clock there before making it; the
// reclaimer's pass starts no earlier than the latest thread that woke it.
// The first launch that uses a unit the mover brought in moves its own clock
// to the mover's when the unit arrived (`Unit::mover_arrival_ns`): on a GPU
// it would have waited that long. And there the launch path waits in real
// time for the mover to make the moves it posted (`Mover::drain`), which
// costs no simulated time (the moves are charged to the mover's clock) but
// takes the mover's timing out of a run's result: without it, which thread
// the machine happened to run first decided whether a move found its unit
// held by a launch (refused) or a prefetch came before its use: before it, 36 % of
// VGG-16's planned moves were refused and its auto step measured 1.5× the
// on-demand one in one run, and `AsPyTorchIssuesItAutoPlansTheWholeStepFromBothThreads`
// measured its step 20 % apart under load and alone. The reclaimer is not in
// step: when it unmaps a finished save (and so whether a unit wanted back is
// revived or copied in) still varies a run, VGG-16 /32 at half its peak by
// 192–210 ms a step over seven runs. A wait for the pager's lock while the
// mover or the reclaimer holds it is charged on the threads' clocks
// (`vmm/lock_calendar.h`: the lock's holds in simulated time, and a thread
// that takes it inside one moved to its end).

namespace vgpumem::vmm {
namespace {

// Why an offload that got as far as trying could not go.
Refusal offload_failure(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ILLEGAL_STATE: return Refusal::elsewhere;   // it moved meanwhile
    case CUDA_ERROR_NOT_READY: return Refusal::held_by_launch;
    case CUDA_ERROR_OUT_OF_MEMORY: return Refusal::no_host_memory;
    default: return Refusal::failed;
  }
}

}  // namespace

bool Pager::offload_unit(Unit* unit, bool inside_grace) {
  return offload_planned(unit, inside_grace, launch_thread().enqueued_bit);
}

bool Pager::offload_planned(Unit* unit, bool inside_grace, std::uint64_t enqueued_bit) {
  MutexLock lock(mutex_);
  // A capture open anywhere: the offload would record events on streams that
  // may be capturing (order_after_users refuses those, not cheaply). Later.
  // Inside its grace only for a plan made with the grace cut, as on demand
  // evicts there when nothing else makes room; torture keeps every grace.
  // An operation this thread has just enqueued (the scheduler's triggers go
  // as the feed hears of one) is done with: the grace guards the next.
  const bool graced = grace_.protects(*unit, enqueued_bit);
  std::optional<Refusal> refusal;
  if (unit->retired) {
    refusal = Refusal::freed;
  } else if (unit->pins != 0) {
    refusal = Refusal::pinned;
  } else if (unit->state.load() != Residency::resident) {
    refusal = Refusal::elsewhere;
  } else if (capture_open()) {
    refusal = Refusal::capture_open;
  } else if (graced && (!inside_grace || options_.check == CheckMode::torture)) {
    refusal = Refusal::in_grace;
  } else {
    reap_saved_units(false);
    if (const CUresult result = offload(device_state(unit->device), unit); result != CUDA_SUCCESS) {
      refusal = offload_failure(result);
    }
  }
  if (refusal) {
    host_path_.refused(*refusal);
    scheduled_refused_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  scheduled_offloads_.fetch_add(1, std::memory_order_relaxed);
  if (graced) planned_grace_evictions_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool Pager::prefetch_unit(Unit* unit) {
  MutexLock lock(mutex_);
  if (unit->retired || unit->state.load() != Residency::on_host || capture_open()) {
    host_path_.refused(unit->retired                                 ? Refusal::freed
                       : unit->state.load() != Residency::on_host ? Refusal::elsewhere
                                                                  : Refusal::capture_open);
    scheduled_refused_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // Held while it comes in, so that making its room never picks it.
  unit->launching.fetch_add(1, std::memory_order_seq_cst);
  reap_saved_units(false);
  const CUresult result = fetch(unit);
  unit->launching.fetch_sub(1, std::memory_order_release);
  if (result != CUDA_SUCCESS) {
    if (result == CUDA_ERROR_OUT_OF_MEMORY) absorb_oom();  // the scheduler's to hear of, not the program's
    host_path_.refused(result == CUDA_ERROR_OUT_OF_MEMORY ? Refusal::no_room : Refusal::failed);
    scheduled_refused_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // As if used now, at the end of the current window: it came back for a
  // use soon, and its last use before it went out is the oldest there is,
  // so least recently used first would make the next room of it. (The
  // scheduler's order sees its next use near, and keeps it too.)
  unit->last_use.store(tick_at(tick_.load(std::memory_order_relaxed), kLastPlace), std::memory_order_relaxed);
  scheduled_prefetches_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// The mover's thread runs each move no earlier than it was posted (on a
// simulated driver), in relaxed capture mode as the reclaimer does: a
// capture may open between the check a move makes and its driver calls,
// and must not be invalidated by them.
void Pager::on_mover_thread(const Mover::Move& move) {
  if (move.posted_ns != 0 && driver_.host_handoff != nullptr) driver_.host_handoff(move.posted_ns, "move posted");
  RelaxedCaptureMode relaxed(driver_, true);
  make_move(move);
}

void Pager::move_ahead(std::span<Unit* const> offloads, std::span<Unit* const> prefetches,
                       bool inside_grace) noexcept {
  Mover* mover = mover_.get();
  Mover::Move move;
  move.inside_grace = inside_grace;
  move.enqueued_bit = launch_thread().enqueued_bit;
  if (mover != nullptr) move.posted_ns = host_clock_ns();
  const auto post_or_make = [&](Unit* unit, bool offload) {
    move.unit = unit;
    move.offload = offload;
    // A full ring (the mover far behind): made here, out of turn. Harmless:
    // a prefetch before the offloads queued ahead of it makes its own room.
    if (mover == nullptr || !mover->post(move)) {
      const std::uint64_t started = host_path_.now();
      make_move(move);
      host_path_.moved_inline(host_path_.now() - started);
    }
  };
  for (Unit* unit : offloads) post_or_make(unit, true);
  for (Unit* unit : prefetches) {
    unit->fetches_queued.fetch_add(1, std::memory_order_relaxed);  // settled by make_move (or the drop)
    post_or_make(unit, false);
  }
  // On a simulated driver, in step with the mover in real time: its moves
  // are charged to its own clock, so this costs the program's simulated
  // time nothing, and what the program finds when it goes on no longer
  // depends on which of the two threads the machine ran first (the
  // reclaimer is not in step: when it unmaps a finished save still varies
  // a run by a few per cent). Where the moves land late on the mover's clock, the
  // program's next use of what they brought waits for them
  // (wait_for_the_mover), as it would on a GPU.
  if (mover != nullptr && driver_.host_handoff != nullptr && !(offloads.empty() && prefetches.empty())) mover->drain();
}

// On the mover's thread (on_mover_thread), or the poster's (move_ahead).
void Pager::make_move(const Mover::Move& move) {
  if (move.offload) {
    count_move(true, offload_planned(move.unit, move.inside_grace, move.enqueued_bit));
    return;
  }
  const bool made = prefetch_unit(move.unit);
  count_move(false, made);
  if (made && move.posted_ns != 0) move.unit->mover_arrival_ns.store(host_clock_ns(), std::memory_order_relaxed);
  fetch_settled(move);
}

// A prefetch posted is made or dropped: a launch waiting for it goes on.
void Pager::fetch_settled(const Mover::Move& move) {
  move.unit->fetches_queued.fetch_sub(1, std::memory_order_release);
  move.unit->fetches_queued.notify_all();
}

// Before a launch takes the slow path for units on the host: those the
// mover is to bring in are waited for, not fetched twice; and, on a
// simulated driver, a unit the mover brought in is used no earlier (on the
// launch's clock) than it arrived, as it could not be on a GPU.
void Pager::wait_for_the_mover(Access& access, std::size_t from) {
  for (std::size_t i = from; i < access.size(); ++i) {
    Unit* unit = access.at(i);
    if (unit->state.load(std::memory_order_acquire) != Residency::resident &&
        unit->fetches_queued.load(std::memory_order_acquire) != 0) {
      host_path_.waited_for_mover();
      for (std::uint32_t queued; (queued = unit->fetches_queued.load(std::memory_order_acquire)) != 0;) {
        unit->fetches_queued.wait(queued, std::memory_order_acquire);
      }
    }
  }
  if (driver_.host_handoff != nullptr) note_mover_arrivals(access, from);
}

void Pager::note_mover_arrivals(Access& access, std::size_t from) {
  for (std::size_t i = from; i < access.size(); ++i) {
    Unit* unit = access.at(i);
    if (unit->mover_arrival_ns.load(std::memory_order_relaxed) == 0) continue;
    if (const std::uint64_t arrived = unit->mover_arrival_ns.exchange(0, std::memory_order_relaxed)) {
      driver_.host_handoff(arrived, "mover's fetch");
    }
  }
}

HostPathCounts Pager::host_path_counts() const noexcept {
  return {host_path_.program_paging_ns(), host_path_.calls(HostSide::program, DriverWork::vmm),
          bytes_offloaded_.load(std::memory_order_relaxed) + bytes_prefetched_.load(std::memory_order_relaxed),
          host_path_.fetches_on_demand(), scheduled_prefetches_.load(std::memory_order_relaxed), host_path_.now()};
}

UnitFacts Pager::facts(const Unit* unit) const {
  MutexLock lock(mutex_);
  UnitFacts facts;
  facts.live = !unit->retired && unit->live > 0;
  facts.device = unit->device;
  facts.bytes = unit->bytes;
  facts.resident = unit->state.load() == Residency::resident;
  facts.movable = facts.live && unit->pins == 0 && unit->launching.load() == 0;
  return facts;
}

std::uint64_t Pager::paging_budget(int device) const {
  MutexLock lock(mutex_);
  const std::uint64_t cap = ledger_.cap(device);
  if (cap == kUncapped) return cap;
  const std::uint64_t counted = ledger_.usage(device).counted;
  auto it = devices_.find(device);
  const std::uint64_t paged = it == devices_.end() ? 0 : it->second->pool.created_bytes();
  const std::uint64_t outside = counted - std::min(paged, counted);
  return cap - std::min(outside, cap);
}

// From the pool: a timed iteration's marks are the last one's, recorded again.
CUevent Pager::mark(CUstream stream) {
  if (driver_.event_elapsed == nullptr) return nullptr;
  CUcontext context = nullptr;
  if (driver_.context_get_current(&context) != CUDA_SUCCESS) return nullptr;
  const CUevent event = marks_.take(context);
  if (event == nullptr) return nullptr;
  if (driver_.event_record(event, stream) != CUDA_SUCCESS) {
    marks_.give(event);
    return nullptr;
  }
  return event;
}

// The context the pager works in on `device` (null before its first use):
// a thread of the scheduler's has none of its own.
CUcontext Pager::device_context(int device) const {
  MutexLock lock(mutex_);
  auto it = devices_.find(device);
  return it == devices_.end() ? nullptr : it->second->context;
}

void Pager::elapsed_ns(std::span<const ElapsedQuery> queries, std::span<std::int64_t> nanoseconds) {
  std::optional<ContextScope> in;
  int in_device = -1;
  for (std::size_t i = 0; i < queries.size() && i < nanoseconds.size(); ++i) {
    const ElapsedQuery& query = queries[i];
    nanoseconds[i] = -1;
    if (query.from == nullptr || query.to == nullptr) continue;
    if (!in || in_device != query.device) {
      in.reset();
      in.emplace(driver_, device_context(query.device));
      in_device = query.device;
    }
    float ms = 0;
    CUresult result = driver_.event_elapsed(&ms, query.from, query.to);
    if (result == CUDA_ERROR_NOT_READY && driver_.event_synchronize(query.to) == CUDA_SUCCESS) {
      result = driver_.event_elapsed(&ms, query.from, query.to);
    }
    if (result == CUDA_SUCCESS) nanoseconds[i] = static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
  }
}

// Back to the pool, no driver call: the next timed iteration records it again.
void Pager::release_mark(int device, CUevent mark) {
  if (mark == nullptr || marks_.give(mark)) return;
  ContextScope in(driver_, device_context(device));  // not the pool's (none are): destroyed
  driver_.event_destroy(mark);
}

}  // namespace vgpumem::vmm
