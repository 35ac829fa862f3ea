#include "vmm/pager.h"

#include <algorithm>
#include <bit>
#include <numeric>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/format_bytes.h"
#include "common/log.h"
#include "vmm/context_scope.h"
#include "vmm/move_pieces.h"
#include "vmm/pager_device_state.h"
#include "vmm/relaxed_capture_mode.h"
#include "vmm/driver_error.h"

// Note [Ordering without waiting]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each device has two copy streams of the
// pager's, non-blocking, one per copy engine, so that units go out and come
// back at once (55 GB/s each way on the H100): the *copy-out* stream and the
// *copy-in* stream. Offloading unit U: an event is recorded on each
// stream that used U since it became resident and the copy-out stream
// waits on them (and on U's own `ready`, should U still be arriving); U's
// bytes are copied to the host there; an event `saved` is recorded. In the
// default `fast` mode U's chunks go back to the pool *at once* (in `strict`
// mode only once U's range is unmapped): whoever takes them next orders its
// first write after the copy-out stream (a fetch makes the copy-in stream
// wait for every save still in flight, which also covers a fetch of U itself
// reading the host copy its own save is writing; a new allocation gets a
// `ready` event its first user waits on). Tests
// `ScheduledMovesTest.APrefetchIntoChunksStillBeingSavedWaitsForTheSave` and
// `…AnOffloadOfAUnitStillArrivingWaitsForItsArrival` fail when either wait
// is taken out.
//
// *Saves in pieces* (since 2026-11-26). A save of more than 8 MiB is copied
// in pieces of 8 MiB (four chunks), each but the last numbered among the
// device's saves with an event after it (`DeviceState::save_pieces`; the last
// piece's event is U's `saved`; the piece, `vmm/move_pieces.h`, is shared
// with the scheduler's model of the engines), and each chunk goes back to the pool with
// its own piece's number. A fetch takes the chunks whose saves end first and
// copies itself in pieces of the same size, each after the save of its own
// chunks alone: its first piece starts when the first piece of the save that
// made its room is done, where before it waited for the whole save. On a
// step whose link is busy both ways that wait idled the copy-in engine for
// as long as the copy-out engine took to save the unit (ResNet-50's 26 MiB
// maps: 4 ms at a time; both engines 88 % busy over its step at a third of
// its peak, 97–98 % after, the step 266.7 → 241.1 ms). A piece the fetch does
// not copy (a library call overwrites it) still waits for its chunks' save
// before the unit's `ready`, after which the call writes. Tests
// `ScheduledMovesTest.AFetchIntoTheRoomOfALargeSaveFollowsItPieceByPiece`
// (fails with a bad byte when a piece is not ordered after its chunks'
// save, and on the clock when it waits for the whole save),
// `OverwritePiecesTest.APieceTheCallOverwritesWholeStillWaitsForTheSaveOfItsChunks`
// (fails with a bad byte when a skipped piece does not wait) and
// `RevivalTest.AUnitSavedInPiecesIsRevivedOnItsChunksToo`. U's own range is unmapped when `saved` has completed:
// the reclaimer thread finds that out (or a non-blocking `cuEventQuery` on the
// next slow path does, whichever comes first; a fetch of U waits for it,
// on the program's thread, unless U can be *revived*). So
// the launch path never waits for the GPU to make room — the unmap-is-not-an-ordering-point fact (gpu-facts §8.6c) is
// handled by never unmapping before the copies that read a range are done.
// Fetching a unit maps chunks, copies its bytes in on the copy-in stream,
// records `ready`, and makes the requesting stream wait on it
// (`cuStreamWaitEvent`): the host does not wait either. Such a wait is a
// *stall*: it is counted, and timed on the GPU by an event recorded on the
// stream before the wait and one after (their elapsed time, read once the
// second has completed), so the trace says how much GPU time on-demand paging
// cost (`stall_ns`).

// Note [Revival]
// ~~~~~~~~~~~~~~
// Revival (`Pager::revive`). A unit wanted back while its save is still
// running has its range still mapped on the chunks it gave back, and the
// bytes there are its own until a chunk is reused (anything that touched the
// unit since would have brought it back first). Each chunk goes back to the
// pool with the serial of the save (or piece of it) that empties it; if every
// one of U's chunks is still free *with one of U's serials* (taken and given
// back again, a chunk carries a later serial and holds another unit's bytes), U takes them back
// and is resident again: no copy in, no wait for its save, which only fills a
// host buffer nothing will read (that buffer goes back to the store, where
// the next to take it on this device is an offload on the same copy-out
// stream). Tests `RevivalTest.AUnitWantedBackBeforeItsSaveEndsIsResidentAgainWithNoCopy`
// and `…AUnitWhoseChunkWasReusedAndGivenBackIsCopiedBackNotRevived` (fails
// when the serial is not compared: the unit comes back with the other unit's
// bytes). Counted in the trace as `revived`. One thing a revive must keep:
// the unit may have gone out before a copy bringing it in had landed (a
// prefetch, then an offload before any use waited for it: room made for
// another unit, or a plan that moved it out early). Its save waits for that
// copy; the revived unit takes back the `ready` event and the streams that
// had waited for it (`Unit::ready_at_save`), so a stream that had not still
// does. Without it, a stream read the chunks before the copy had written
// them: `ScheduledMovesTest.AUnitRevivedBeforeItsCopyInLandedIsReadOnlyOnceItHas`,
// fast and strict (found on 2026-11-28 once offloads went with their last
// use: one VGG-16 run in about 250 under load ended with other weights,
// one in seven with the planner thread slowed on purpose; none in 162
// after).
// And a second: the save left running still *reads* the range, so the range
// must not be unmapped before it ends. The revived unit keeps the save's
// event (`Unit::revived_save`) and every unmap of its range waits for it
// first (`Pager::unmap_home`); without it, a free right after a revival
// unmapped the range under the save, which faults a GPU (a fatal 700,
// gpu-facts §8.6c) and faulted the simulator's copy:
// `RevivalTest.AFreeOfARevivedUnitWaitsForTheSaveStillReadingIt` (found on
// 2026-11-29 by the mover's randomized test, in one run of about five).

// Note [cuMemFree waits for the program's work]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A free returns once the program's work on the device is done, as it does
// without vgpumem: a kernel may still reach the memory by a pointer no hook
// saw, and a program may count on the free as a barrier. It does not wait
// for the pager's own copies: offloads and prefetches queued ahead for later
// operations, which a context synchronise would wait for too (on a trainer
// that frees every step that wait was a quarter of the run:
// docs/journal/2026-11-28-benchmarks.md#cumemfree-without-the-pagers-copies-2026-11-28).
// `Pager::wait_for_program_work` records an event on the legacy default
// stream of each context the device's work ran in and waits for it (the
// legacy stream waits for every blocking stream of its context, per-thread
// default streams included), then synchronises each non-blocking stream the
// program made (`program_streams`) and each stream the registry named (so a
// stream made where no hook saw it is waited for too, once it has named
// paged memory). The pager's two copy streams are non-blocking and in
// neither list. The freed unit's own copies are waited for by
// its release, as for `cuMemFreeAsync`. Where a non-blocking stream may be
// unlisted (one made in a green context, `cuGreenCtxStreamCreate`) or an
// event cannot be had, the free synchronises the device's contexts whole, as
// it did before. The trace's `paging.frees_waiting` counts both.

namespace vgpumem::vmm {
namespace {

constexpr std::uint64_t kAllStreams = ~std::uint64_t{0};

}  // namespace


// ---- construction ------------------------------------------------------------------------

Pager::Pager(const DriverOps& driver, CapLedger& ledger, MemoryObserver& observer, PagerOptions options)
    : driver_(driver),
      ledger_(ledger),
      observer_(observer),
      options_(options),
      streams_(driver),
      grace_(options.grace_operations),
      lending_(options.grace == GraceKind::lend ? options.grace_operations : 0),
      host_path_(driver.host_time_ns),
      host_(driver, options.host_limit, [this](int device) {
        lock_is_held();
        drain_copy_stream(device_state(device));
      }, &host_path_) {
  if (driver_.host_time_ns != nullptr && driver_.host_handoff != nullptr) {
    lock_calendar_ = std::make_unique<LockCalendar>(driver_.host_time_ns, driver_.host_handoff);
    mutex_.observe(lock_calendar_.get());
  }
  if (options_.reclaimer && driver_.context_set_current != nullptr) {
    reclaimer_ = std::make_unique<Reclaimer>([this] { reclaim(); });
  }
  if (options_.mover && driver_.context_set_current != nullptr) {
    mover_ = std::make_unique<Mover>([this](const Mover::Move& move) { on_mover_thread(move); }, 4096,
                                     [this](const Mover::Move& move) {
                                       if (!move.offload) fetch_settled(move);
                                     });
  }
}

// Leaked with the runtime in the shim (stop_reclaimer runs at exit); tests
// tear down here, the mover and the reclaimer first (declared last).
Pager::~Pager() = default;

void Pager::stop_reclaimer() {
  if (mover_) mover_->stop();
  if (reclaimer_) reclaimer_->stop();
}

void Pager::abandon_reclaimer_after_fork() {
  // Never destroyed: their std::threads name the parent's threads. Kept
  // reachable, so a leak checker does not report them.
  abandoned_mover_ = mover_.release();
  abandoned_reclaimer_ = reclaimer_.release();
}

nlohmann::json Pager::mover_summary() const {
  if (!mover_) return {{"running", false}};
  const Mover::Counts counts = mover_->counts();
  return {{"running", true},
          {"posted", counts.posted},
          {"made", counts.made},
          {"ring_full", counts.ring_full},
          {"busy_ns", counts.busy_ns},
          {"lag_ns_max", counts.lag_ns_max}};
}

Pager::DeviceState& Pager::device_state(int device) {
  auto& slot = devices_[device];
  if (!slot) slot = std::make_unique<DeviceState>(device, driver_, ledger_, options_.block_chunks, &host_path_);
  return *slot;
}

// ---- pins for life -----------------------------------------------------------------------

CUresult Pager::make_resident_now(Unit* unit) {
  if (unit->state.load() == Residency::on_host) {
    if (const CUresult result = fetch(unit); result != CUDA_SUCCESS) return result;
  }
  if (unit->ready != nullptr) {
    if (const CUresult result = driver_.event_synchronize(unit->ready); result != CUDA_SUCCESS) return result;
    set_ready(unit, nullptr);
  }
  return CUDA_SUCCESS;
}

// Work recorded into a graph is replayed later by cuGraphLaunch, which no
// hook can follow into: everything it touches is made resident now, waited
// for on the host (the capturing stream cannot wait on the pager's events),
// and never offloaded again while it lives. Memory exported to another
// process, or whose address was uploaded for a kernel to follow, is the same.
CUresult Pager::pin_for_life(const std::uint64_t* words, std::size_t count, LifetimePin why) {
  MutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, true);
  reap_saved_units(false);
  CUresult result = CUDA_SUCCESS;
  for (std::size_t i = 0; i < count && result == CUDA_SUCCESS; ++i) {
    Unit* unit = index_.lookup(words[i]);
    if (unit == nullptr || unit->retired) continue;
    for_each_piece(unit, [&](Unit* piece) {
      lock_is_held();
      return (result = pin_unit_for_life(piece, why)) == CUDA_SUCCESS;
    });
  }
  return result;
}

// Units an operation holds, on a capturing stream (pin_for_life's reason).
CUresult Pager::pin_units_for_life(Unit* const* units, std::size_t count, LifetimePin why) {
  MutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, true);
  reap_saved_units(false);
  for (std::size_t i = 0; i < count; ++i) {
    if (units[i]->retired) continue;
    if (const CUresult result = pin_unit_for_life(units[i], why); result != CUDA_SUCCESS) return result;
  }
  return CUDA_SUCCESS;
}

CUresult Pager::pin_unit_for_life(Unit* unit, LifetimePin why) {
  static constexpr const char* kBecause[kLifetimePinReasons] = {
      "a captured graph uses it", "it was exported by cuIpcGetMemHandle",
      "the program gave another device access to it", "the program exported its handle",
      "a node of an explicitly built graph names it",
      "the program exported it as a dma-buf (cuMemGetHandleForAddressRange)"};
  const auto bit = static_cast<std::uint8_t>(why);
  const int reason = std::countr_zero(bit);
  if (const CUresult result = make_resident_now(unit); result != CUDA_SUCCESS) {
    VGPUMEM_LOG_WARN("cannot keep {} at {:#x} resident ({}): error {}", format_bytes(unit->bytes), unit->seen_at(),
                     kBecause[reason], driver_error(result));
    if (result != CUDA_ERROR_OUT_OF_MEMORY) ooms_.fetch_add(1, std::memory_order_relaxed);  // else counted already
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const std::uint8_t before = unit->lifetime_pins.fetch_or(bit);
  if ((before & bit) != 0) return CUDA_SUCCESS;
  if (before == 0) ++unit->pins;
  lifetime_pinned_bytes_[reason].fetch_add(unit->bytes, std::memory_order_relaxed);
  VGPUMEM_LOG_INFO("pinned {} at {:#x} resident: {}", format_bytes(unit->bytes), unit->seen_at(), kBecause[reason]);
  return CUDA_SUCCESS;
}

void Pager::unpin_for_life(std::uint64_t address, LifetimePin why) {
  const auto bit = static_cast<std::uint8_t>(why);
  MutexLock lock(mutex_);
  Unit* unit = index_.lookup(address);
  if (unit == nullptr || unit->retired) return;
  for_each_piece(unit, [&](Unit* piece) {
    if ((piece->lifetime_pins.load() & bit) == 0) return true;
    if (piece->lifetime_pins.fetch_and(static_cast<std::uint8_t>(~bit)) == bit) --piece->pins;
    lifetime_pinned_bytes_[std::countr_zero(bit)].fetch_sub(piece->bytes, std::memory_order_relaxed);
    return true;
  });
}

void Pager::time_stall(CUstream stream, CUevent reached) {
  CUevent passed = nullptr;
  if (driver_.event_create(&passed, CU_EVENT_BLOCKING_SYNC) == CUDA_SUCCESS &&
      driver_.event_record(passed, stream) == CUDA_SUCCESS) {
    {
      MutexLock lock(stall_timers_mutex_);
      stall_timers_.push_back(StallTimer{reached, passed});
    }
    wake_reclaimer();  // reads it once the wait is over (time_stalls)
    return;
  }
  if (passed != nullptr) driver_.event_destroy(passed);
  driver_.event_destroy(reached);
}

// Adds a stall's length to the total if its wait is `over`, and destroys
// its events.
void Pager::finish_stall(const StallTimer& timer, bool over) {
  float ms = 0;
  if (over && driver_.event_elapsed(&ms, timer.reached, timer.passed) == CUDA_SUCCESS && ms > 0) {
    stall_ns_.fetch_add(static_cast<std::uint64_t>(static_cast<double>(ms) * 1e6), std::memory_order_relaxed);
  }
  driver_.event_destroy(timer.reached);
  driver_.event_destroy(timer.passed);
}

// Adds up the stalls whose wait is over; the others stay for a later look
// (without a reclaimer thread: in a forked child, or when it is turned off).
void Pager::reap_stall_timers() {
  auto over = [&](const StallTimer& timer) {
    if (driver_.event_query(timer.passed) != CUDA_SUCCESS) return false;
    finish_stall(timer, true);
    return true;
  };
  MutexLock lock(stall_timers_mutex_);
  stall_timers_.erase(std::remove_if(stall_timers_.begin(), stall_timers_.end(), over), stall_timers_.end());
}

void Pager::set_ready(Unit* unit, CUevent event) {
  const CUevent replaced = unit->ready.exchange(event);
  unit->ready_for.store(event == nullptr ? kAllStreams : 0);
  if (replaced == nullptr) return;
  // A launch ordering its stream after the old event without the lock
  // (order_unlocked) read it before the exchange: it is destroyed once that
  // launch has made its wait (a few microseconds).
  while (unit->ready_readers.load() != 0) std::this_thread::yield();
  driver_.event_destroy(replaced);
}

// ---- moving units ------------------------------------------------------------------------

CUresult Pager::record_on_copy_stream(DeviceState& state, CUevent* event) {
  return record_on_stream(state.copy_stream, event);
}

CUresult Pager::record_on_stream(CUstream stream, CUevent* event, unsigned flags) {
  if (const CUresult result = driver_.event_create(event, flags); result != CUDA_SUCCESS) {
    return result;
  }
  const CUresult result = driver_.event_record(*event, stream);
  if (result != CUDA_SUCCESS) {
    driver_.event_destroy(*event);
    *event = nullptr;
  }
  return result;
}

// The copy stream (in the pager's context of the unit's device) waits for
// everything each stream that used the unit has enqueued so far: an event is
// recorded on each, in that stream's own context.
CUresult Pager::order_after_users(DeviceState& state, Unit* unit) {
  PhaseTimer timer(phases_, PagerPhase::wait_users);
  const std::uint64_t users = unit->used_by.load(std::memory_order_acquire);
  bool synchronise = false;
  if ((users & StreamRegistry::kUnnamedBit) != 0) {
    // Per-thread default streams (no other thread can record on one): the
    // copy stream waits for an event on each legacy stream of the device's
    // contexts instead, which the per-thread streams there, blocking
    // streams, have reached.
    synchronise = capture_open() || !streams_.unnamed_is_per_thread_only() ||
                  !order_after_legacy_streams(state, unit->device);
  }
  for (unsigned bit = 0; bit < StreamRegistry::kNamed && !synchronise; ++bit) {
    if ((users & (std::uint64_t{1} << bit)) == 0) continue;
    const StreamRegistry::Named user = streams_.named(bit);
    if (user.context == nullptr) continue;  // retired: its work was waited for when it went
    ContextScope in(driver_, user.context);
    // An event recorded on a capturing stream would become part of the
    // graph: a unit a capture may still use stays where it is.
    if (capture_open() && capturing(user.stream)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    CUevent done = nullptr;
    if (record_on_stream(user.stream, &done) != CUDA_SUCCESS) {
      synchronise = true;
      break;
    }
    if (driver_.stream_wait_event(state.copy_stream, done, 0) != CUDA_SUCCESS) synchronise = true;
    driver_.event_destroy(done);
  }
  if (!synchronise) return CUDA_SUCCESS;
  if (capture_open()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // a synchronisation would end the capture
  context_syncs_.fetch_add(1, std::memory_order_relaxed);
  return synchronize_device(unit->device);
}

// Every context the device's work may have run in: those the stream
// registry saw there, and the pager's own. Never "the current context",
// which may be another device's.
template <typename Visit>
void Pager::for_each_context_of(int device, Visit&& visit) {
  streams_.for_each_context(device, visit);
  if (auto it = devices_.find(device); it != devices_.end() && it->second->context != nullptr) {
    visit(it->second->context);
  }
}

CUresult Pager::synchronize_device(int device) {
  CUresult result = CUDA_SUCCESS;
  for_each_context_of(device, [&](CUcontext context) {
    ContextScope in(driver_, context);
    if (const CUresult r = driver_.context_synchronize(); r != CUDA_SUCCESS && result == CUDA_SUCCESS) result = r;
  });
  return result;
}

// The copy stream waits for an event recorded on the legacy stream of each
// context on `device`: for everything the blocking streams there (per-thread
// default streams too) had enqueued. False if an event could not be had.
bool Pager::order_after_legacy_streams(DeviceState& state, int device) {
  bool ordered = true;
  for_each_context_of(device, [&](CUcontext context) {
    ContextScope in(driver_, context);
    CUevent reached = nullptr;
    if (record_on_stream(CU_STREAM_LEGACY, &reached) != CUDA_SUCCESS) {
      ordered = false;
      return;
    }
    if (driver_.stream_wait_event(state.copy_stream, reached, 0) != CUDA_SUCCESS) ordered = false;
    driver_.event_destroy(reached);
  });
  return ordered;
}

// cuMemFree's wait: every stream of the program's on the device has run
// what it was given, the pager's own copies not waited for
// (vmm/program_streams.h; release_unit waits for the freed unit's own). An
// event on each context's legacy default stream reaches the blocking
// streams there, and each listed non-blocking stream is waited for itself,
// as is every stream the registry named (one no hook saw made, once it did
// paged work).
// Where a non-blocking stream may be unlisted, an event cannot be had or a
// stream refuses, the contexts are synchronised whole.
CUresult Pager::wait_for_program_work(int device) {
  if (!program_streams_.complete()) {
    frees_waiting_for_contexts_.fetch_add(1, std::memory_order_relaxed);
    return synchronize_device(device);
  }
  CUresult result = CUDA_SUCCESS;
  bool whole = false;
  for_each_context_of(device, [&](CUcontext context) {
    ContextScope in(driver_, context);
    CUevent passed = nullptr;  // a blocking-sync event: the thread sleeps, it does not spin
    constexpr unsigned kFlags = CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC;
    if (record_on_stream(CU_STREAM_LEGACY, &passed, kFlags) != CUDA_SUCCESS) {
      whole = true;
      return;
    }
    if (const CUresult r = driver_.event_synchronize(passed); r != CUDA_SUCCESS && result == CUDA_SUCCESS) result = r;
    driver_.event_destroy(passed);
  });
  // A stream the driver no longer knows (destroyed where no hook saw it)
  // refuses: its work may still run, and the contexts are synchronised whole.
  const auto through_stream = [&](CUstream stream) {
    if (!whole && driver_.stream_synchronize(stream) != CUDA_SUCCESS) whole = true;
  };
  program_streams_.for_each_on(device, through_stream);
  // And every stream that named paged memory on the device: one made where
  // no hook saw it is waited for all the same once it has done paged work.
  for (unsigned bit = 0; bit < StreamRegistry::kNamed && !whole; ++bit) {
    const StreamRegistry::Named named = streams_.named(bit);
    if (named.context == nullptr || named.stream == CU_STREAM_LEGACY || named.device != device) continue;
    through_stream(named.stream);
  }
  if (whole) {
    frees_waiting_for_contexts_.fetch_add(1, std::memory_order_relaxed);
    return synchronize_device(device);
  }
  frees_waiting_for_program_.fetch_add(1, std::memory_order_relaxed);
  return result;
}

// The pager's own copies on `state`'s device are done (a fallback where an
// event could not be had).
void Pager::drain_copy_stream(DeviceState& state) {
  ContextScope in(driver_, state.context);
  if (state.copy_stream != nullptr) driver_.stream_synchronize(state.copy_stream);
  if (state.to_device_stream != nullptr) driver_.stream_synchronize(state.to_device_stream);
}

void Pager::note_saved_pieces(DeviceState& state) {
  state.save_pieces.poll(driver_);
  state.saves_done = std::max(state.saves_done, state.save_pieces.done());  // the stream runs saves in turn
}

// The copy-in stream waits for save `serial` (and so every save before it)
// unless it is done.
void Pager::order_after_save(DeviceState& state, std::uint64_t serial) {
  if (serial <= state.saves_done) return;  // pieces found done by take_chunks, just before, included
  // A piece of a save before its last: its own event, if it has one.
  if (const CUevent piece = state.save_pieces.event_for(serial);
      piece != nullptr && driver_.stream_wait_event(state.to_device_stream, piece, 0) == CUDA_SUCCESS) {
    return;
  }
  const Unit* at = nullptr;  // the save numbered `serial`, or the first after it
  for (const Unit* saving : saved_units_) {
    if (saving->device != state.pool.device() || saving->save_serial < serial || saving->saved == nullptr) continue;
    if (at == nullptr || saving->save_serial < at->save_serial) at = saving;
  }
  if (at == nullptr || driver_.stream_wait_event(state.to_device_stream, at->saved, 0) != CUDA_SUCCESS) {
    order_streams(state, state.to_device_stream, state.copy_stream);
  }
}

// The copy-out stream waits for read `serial` on the copy-in stream (and
// so every read before it) unless it is done.
void Pager::order_after_fetch(DeviceState& state, std::uint64_t serial) {
  if (serial <= state.fetch_marks.done()) return;
  const CUevent read = state.fetch_marks.event_for(serial);
  if (read == nullptr || driver_.stream_wait_event(state.copy_stream, read, 0) != CUDA_SUCCESS) {
    order_streams(state, state.copy_stream, state.to_device_stream);
  }
}

// `waiter` waits for everything enqueued on `before` so far (the pager's
// own streams, in the device's context); if no event can be had, the host
// waits instead.
void Pager::order_streams(DeviceState& state, CUstream waiter, CUstream before) {
  CUevent mark = nullptr;
  if (driver_.event_create(&mark, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
    const bool ordered = driver_.event_record(mark, before) == CUDA_SUCCESS &&
                         driver_.stream_wait_event(waiter, mark, 0) == CUDA_SUCCESS;
    driver_.event_destroy(mark);
    if (ordered) return;
  }
  driver_.stream_synchronize(before);
  static_cast<void>(state);
}

CUresult Pager::offload(DeviceState& state, Unit* unit) {
  ContextScope in(driver_, state.context);
  Residency expected = Residency::resident;
  if (!unit->state.compare_exchange_strong(expected, Residency::moving_out)) return CUDA_ERROR_ILLEGAL_STATE;
  // A launch that checked the unit before the exchange above is still
  // between its check and its enqueue: leave the unit alone.
  if (unit->launching.load(std::memory_order_seq_cst) != 0) {
    unit->state.store(Residency::resident);
    return CUDA_ERROR_NOT_READY;
  }
  CUresult result = CUDA_SUCCESS;
  state.fetch_marks.poll(driver_);
  std::uint64_t read = 0;  // the read on the copy-in stream that may still use the buffer
  void* host = nullptr;
  {
    PhaseTimer timer(phases_, PagerPhase::pin_host);
    host = host_.take(unit->bytes, unit->device, &result, state.fetch_marks.done(), &read);
  }
  // Copy out only what has arrived, into a buffer no fetch still reads.
  if (host != nullptr && read != 0) order_after_fetch(state, read);
  if (host != nullptr && unit->ready != nullptr &&
      driver_.stream_wait_event(state.copy_stream, unit->ready, 0) != CUDA_SUCCESS) {
    order_streams(state, state.copy_stream, state.to_device_stream);
  }
  CUevent timed_from = nullptr, timed_to = nullptr;
  const bool timed = host != nullptr && link_meter_.begin(LinkMeter::kToHost, &timed_from, &timed_to);
  if (host != nullptr && (result = order_after_users(state, unit)) == CUDA_SUCCESS && timed) {
    driver_.event_record(timed_from, state.copy_stream);
  }
  // The first piece alone is timed: the link meter wants a copy's own time.
  const std::uint64_t first_piece = std::min(unit->bytes, kMovePieceBytes);
  const std::uint64_t first_serial = state.saves_issued + 1;
  std::uint64_t copied = 0;
  bool timed_recorded = false;
  if (host == nullptr || result != CUDA_SUCCESS ||
      (result = copy_out_in_pieces(state, unit, host, timed ? timed_to : nullptr, &timed_recorded, &copied)) !=
          CUDA_SUCCESS) {
    if (timed) link_meter_.end(LinkMeter::kToHost, state.context, timed_from, timed_to, 0, false);
    if (copied != 0) drain_copy_stream(state);  // pieces copied may still write the buffer
    if (host != nullptr) host_.give_back(host, unit->bytes);
    unit->state.store(Residency::resident);
    VGPUMEM_LOG_WARN("cannot offload {} at {:#x}: error {}{}", format_bytes(unit->bytes), unit->seen_at(),
                     driver_error(result), host == nullptr ? " (no pinned host memory left; VGPUMEM_HOST_LIMIT)" : "");
    return result;
  }
  if (timed) link_meter_.end(LinkMeter::kToHost, state.context, timed_from, timed_to, first_piece, timed_recorded);
  CUevent saved = nullptr;
  if ((result = record_on_copy_stream(state, &saved)) != CUDA_SUCCESS) {
    drain_copy_stream(state);  // without an event, wait for the copy right here
  }
  // Fast: the chunks serve the next owner at once (its work is ordered after
  // the piece of the save that reads them); the range stays mapped on them
  // until the save completes. Strict: they stay the unit's until its range
  // is unmapped, so nothing can reach another buffer's bytes through it.
  unit->save_first = first_serial;
  unit->save_serial = ++state.saves_issued;
  if (options_.check == CheckMode::fast) {
    if (saved != nullptr && unit->aliases.empty()) unit->given_back.assign(unit->chunks.begin(), unit->chunks.end());
    for (std::size_t i = 0; i < unit->chunks.size(); ++i) {  // each with its own piece's number
      state.pool.give_back(unit->chunks[i], saved != nullptr ? first_serial + i / kMovePieceChunks : 0);
    }
    unit->chunks.clear();
  }
  unit->host = host;
  unit->saved = saved;
  unit->unmap_pending = true;
  if (saved != nullptr) saved_units_.push_back(unit);
  // What streams must wait for before they use its bytes is kept for a
  // revive: the save waits for it, nothing else has to.
  if (unit->ready_at_save != nullptr) driver_.event_destroy(unit->ready_at_save);
  unit->ready_at_save = unit->ready.exchange(nullptr);
  unit->ready_for_at_save = unit->ready_for.exchange(0);
  unit->used_by.store(0);
  state.resident_bytes -= unit->bytes;
  unit->state.store(Residency::on_host);
  offloads_.fetch_add(1, std::memory_order_relaxed);
  bytes_offloaded_.fetch_add(unit->bytes, std::memory_order_relaxed);
  unit->span_at = unit->seen_at();
  observer_.moved(unit->device, unit->span_at, unit->bytes, true);
  trace_resident(unit->device, state);
  VGPUMEM_LOG_DEBUG("offloaded {} at {:#x} (last use {})", format_bytes(unit->bytes), unit->seen_at(),
                    unit->last_use.load());
  if (saved == nullptr) finish_unmap(unit, false);
  wake_reclaimer();  // to unmap the range once saved, and pin the next host buffer
  return CUDA_SUCCESS;
}

// A large save goes in pieces (vmm/move_pieces.h), each but the last
// numbered among the device's saves with an event after it
// (DeviceState::save_pieces): a fetch given a piece's chunks starts as soon
// as that piece is saved.
CUresult Pager::copy_out_in_pieces(DeviceState& state, const Unit* unit, void* host, CUevent after_first,
                                   bool* after_first_recorded, std::uint64_t* copied) {
  auto* bytes = static_cast<unsigned char*>(host);
  for (std::uint64_t offset = 0; offset < unit->bytes; offset += kMovePieceBytes) {
    const std::uint64_t length = std::min(kMovePieceBytes, unit->bytes - offset);
    if (const CUresult result = driver_.copy_to_host_async(bytes + offset, unit->address + offset, length, state.copy_stream);
        result != CUDA_SUCCESS) {
      return result;
    }
    *copied += length;
    if (offset == 0 && after_first != nullptr) {
      *after_first_recorded = driver_.event_record(after_first, state.copy_stream) == CUDA_SUCCESS;
    }
    if (offset + length < unit->bytes) state.save_pieces.mark_as(driver_, state.copy_stream, ++state.saves_issued);
  }
  return CUDA_SUCCESS;
}

bool Pager::offload_victim(DeviceState& state, const Unit* keep) {
  PhaseTimer timer(phases_, PagerPhase::evict);
  // In the policy's order (victim_policy.h); a unit a launch is holding is
  // skipped, and one in its grace (LaunchGrace) goes only after every other.
  // The first candidate almost always goes, so a heap: linear to build, and
  // a logarithmic pop for each one that cannot. Launches keep writing
  // `last_use` meanwhile: the heap orders a snapshot of it.
  constexpr std::uint64_t kGraced = std::uint64_t{1} << 63;  // above every rank
  const VictimPolicy& policy = *victims_.load(std::memory_order_acquire);
  const bool informed = policy.informed();
  auto& candidates = state.victims;  // reused: no allocation once grown
  candidates.clear();
  for (const auto& unit : state.units) {
    if (may_go(*unit, keep)) {
      const std::uint64_t graced = grace_.protects(*unit) ? kGraced : 0;
      const std::uint64_t rank = policy.rank(*unit, unit->last_use.load(std::memory_order_relaxed));
      candidates.emplace_back(std::min(rank, VictimPolicy::kMaxRank) | graced, unit.get());
    }
  }
  const auto goes_later = [](const auto& a, const auto& b) { return a.first > b.first; };
  std::make_heap(candidates.begin(), candidates.end(), goes_later);
  while (!candidates.empty()) {
    std::pop_heap(candidates.begin(), candidates.end(), goes_later);
    const auto [key, first] = candidates.back();
    candidates.pop_back();
    if (offload(state, first) == CUDA_SUCCESS) {
      if ((key & kGraced) != 0) grace_evictions_.fetch_add(1, std::memory_order_relaxed);
      victims_taken_.fetch_add(1, std::memory_order_relaxed);
      if (informed) victims_in_order_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

bool Pager::may_go(const Unit& unit, const Unit* keep) const {
  return &unit != keep && !unit.retired && unit.pins == 0 && unit.state.load() == Residency::resident &&
         unit.launching.load() == 0;
}

// Making room for the program's own memory releases blocks, and only whole
// ones, so the block to empty is chosen first: among those whose every
// taken chunk is a unit's that may go, the one with the fewest units in
// their grace (which on-demand eviction takes last too), then the fewest
// bytes to move. (A unit's blocks are its own, ChunkPool; when chunks of
// shared blocks were handed out, least-recently-used victims freed chunks
// scattered over every block, 13 units of 2 MiB out for 8 MiB of room.
// Test: PagerTest.MakingRoomReleasesWholeBlocksAndMovesNoMoreThanTheRoom.)
bool Pager::offload_cheapest_block(DeviceState& state) {
  struct Cost {
    std::uint32_t chunks_that_may_go = 0;
    std::uint32_t graced_units = 0;
    std::uint64_t bytes = 0;
    std::size_t last_unit = 0;  // 1 + the index of the last unit counted here
    bool operator<(const Cost& other) const {
      return graced_units != other.graced_units ? graced_units < other.graced_units : bytes < other.bytes;
    }
  };
  std::vector<Cost> costs(state.pool.slots());
  for (std::size_t i = 0; i < state.units.size(); ++i) {
    const Unit& unit = *state.units[i];
    if (unit.chunks.empty() || !may_go(unit, nullptr)) continue;
    const bool graced = grace_.protects(unit);
    for (const Chunk& chunk : unit.chunks) {
      Cost& cost = costs[chunk.block];
      ++cost.chunks_that_may_go;
      if (cost.last_unit == i + 1) continue;  // a unit counts once on each block it spans
      cost.last_unit = i + 1;
      cost.bytes += unit.bytes;
      cost.graced_units += graced ? 1 : 0;
    }
  }
  std::optional<std::uint32_t> cheapest;
  for (std::uint32_t slot = 0; slot < costs.size(); ++slot) {
    const std::uint32_t taken = state.pool.taken_chunks(slot);
    if (taken == 0 || costs[slot].chunks_that_may_go != taken) continue;  // empty already, or something stays
    if (!cheapest || costs[slot] < costs[*cheapest]) cheapest = slot;
  }
  if (!cheapest) return false;
  std::vector<Unit*> going;
  for (const auto& unit : state.units) {
    if (may_go(*unit, nullptr) && std::any_of(unit->chunks.begin(), unit->chunks.end(),
                                              [slot = *cheapest](const Chunk& chunk) { return chunk.block == slot; })) {
      going.push_back(unit.get());
    }
  }
  PhaseTimer timer(phases_, PagerPhase::evict);
  bool moved = false;
  for (Unit* unit : going) {
    const bool graced = grace_.protects(*unit);
    if (offload(state, unit) != CUDA_SUCCESS) continue;
    victims_taken_.fetch_add(1, std::memory_order_relaxed);
    if (graced) grace_evictions_.fetch_add(1, std::memory_order_relaxed);
    moved = true;
  }
  return moved;
}

// Maps `count` chunks at `address`, one mapping per run of chunks that
// follow one another in a block (a whole block, from its start: ChunkPool),
// and appends each mapping to `runs`, so that what was mapped can be
// unmapped mapping by mapping; the pool counts each block's mappings. On an
// error, `runs` holds what was mapped before it.
CUresult Pager::map_runs(int device, std::uint64_t address, const Chunk* chunks, std::size_t count,
                         std::vector<Mapping>* runs) {
  ChunkPool& pool = device_state(device).pool;
  for (std::size_t first = 0; first < count;) {
    std::size_t length = 1;
    while (first + length < count && chunks[first + length].follows(chunks[first + length - 1])) ++length;
    const CUresult result = counted_call(&host_path_, DriverWork::vmm, [&] {
      return driver_.map(address + first * kChunkBytes, length * kChunkBytes, chunks[first].offset,
                         chunks[first].handle, 0);
    });
    if (result != CUDA_SUCCESS) return result;
    runs->push_back(Mapping{static_cast<std::uint32_t>(length), chunks[first].block});
    pool.note_mapped(chunks[first].block, true);
    first += length;
  }
  return CUDA_SUCCESS;
}

// Unmaps the mappings `runs` lists from `address`, and forgets them when all
// went. All in one call where the driver takes it: an unmap costs per call
// and per handle, and the reclaimer does this under the pager's lock.
// Mapping by mapping otherwise: the driver unmaps whole mappings only.
bool Pager::unmap_runs(int device, std::uint64_t address, std::vector<Mapping>* runs) {
  ChunkPool& pool = device_state(device).pool;
  if (runs->size() > 1 && whole_range_unmap_) {
    std::uint64_t chunks = 0;
    for (const Mapping& run : *runs) chunks += run.chunks;
    if (counted_call(&host_path_, DriverWork::vmm, [&] { return driver_.unmap(address, chunks * kChunkBytes); }) ==
        CUDA_SUCCESS) {
      for (const Mapping& run : *runs) pool.note_mapped(run.block, false);
      runs->clear();
      return true;
    }
    whole_range_unmap_ = false;  // this driver wants one call per mapping
    VGPUMEM_LOG_DEBUG("the driver refused one unmap over {} mappings; unmapping mapping by mapping from now on",
                      runs->size());
  }
  bool unmapped = true;
  std::uint64_t at = address;
  for (const Mapping& run : *runs) {
    if (counted_call(&host_path_, DriverWork::vmm, [&] { return driver_.unmap(at, run.chunks * kChunkBytes); }) ==
        CUDA_SUCCESS) {
      pool.note_mapped(run.block, false);
    } else {
      unmapped = false;
    }
    at += run.chunks * kChunkBytes;
  }
  if (unmapped) runs->clear();
  return unmapped;
}

bool Pager::unmap_home(Unit* unit) {
  if (unit->revived_save != nullptr) {  // a save a revival left still reads the range
    PhaseTimer timer(phases_, PagerPhase::wait_save);
    driver_.event_synchronize(unit->revived_save);
    driver_.event_destroy(unit->revived_save);
    unit->revived_save = nullptr;
  }
  return unmap_runs(unit->device, unit->address, &unit->home_runs);
}

void Pager::return_chunks(DeviceState& state, std::vector<Chunk>* chunks, std::uint64_t save) {
  for (const Chunk& chunk : *chunks) state.pool.give_back(chunk, save);
  chunks->clear();
}

void Pager::finish_unmap(Unit* unit, bool wait) {
  DeviceState& state = device_state(unit->device);
  ContextScope in(driver_, state.context);
  if (unit->saved != nullptr) {
    if (wait) {
      PhaseTimer timer(phases_, PagerPhase::wait_save);
      driver_.event_synchronize(unit->saved);
    }
    driver_.event_destroy(unit->saved);
    unit->saved = nullptr;
  }
  // Done (waited for, or found done by the caller): so is every save before
  // it on the copy-out stream, and the copy in it waited for.
  state.saves_done = std::max(state.saves_done, unit->save_serial);
  if (unit->ready_at_save != nullptr) {
    driver_.event_destroy(unit->ready_at_save);
    unit->ready_at_save = nullptr;
  }
  unit->unmap_pending = false;
  unit->given_back.clear();
  const std::uint64_t driver_work_began = host_path_.now();
  const bool home = unmap_home(unit);
  const bool aliases = unmap_aliases(unit);
  host_path_.move_driver_work(true, host_path_.now() - driver_work_began);
  if (!(aliases && home)) {
    // Still mapped somewhere: its next fetch unmaps again before it maps
    // (repair_stale_mapping). Its bytes are safe on the host meanwhile, and
    // in strict mode its chunks stay its own.
    unit->stale_mapping = true;
    VGPUMEM_LOG_WARN("the driver refused to unmap {} at {:#x} after its offload; retried when it comes back",
                     format_bytes(unit->bytes), unit->seen_at());
    return;
  }
  return_chunks(device_state(unit->device), &unit->chunks);  // kept until now in strict mode
}

// An unmap the driver refused after an offload, tried again (a mapping it
// did unmap the first time refuses now, harmlessly): mapping the range anew
// shows whether it is free.
void Pager::repair_stale_mapping(DeviceState& state, Unit* unit) {
  ContextScope in(driver_, state.context);
  unmap_home(unit);
  unit->home_runs.clear();
  for (Alias& alias : unit->aliases) {
    if (alias.mapped) unmap_runs(unit->device, alias.address, &alias.runs);
    alias.runs.clear();
    alias.mapped = false;
  }
  unit->stale_mapping = false;
  return_chunks(state, &unit->chunks);
}

// A unit whose range is still mapped after its offload: wait for the copy
// that saves it and unmap the range now.
void Pager::unmap_now(Unit* unit) {
  if (!unit->unmap_pending) return;
  saved_units_.erase(std::remove(saved_units_.begin(), saved_units_.end(), unit), saved_units_.end());
  finish_unmap(unit, true);
}

// Strict mode: an offloaded unit keeps its chunks until its range is
// unmapped. When the pool runs dry, the oldest save on the device is waited
// for and its range unmapped, which gives its chunks back. False if none is
// pending there (in fast mode, never: their chunks went back at once).
bool Pager::unmap_oldest_save(DeviceState& state) {
  for (Unit* unit : saved_units_) {
    if (unit->device == state.pool.device() && !unit->chunks.empty()) {
      unmap_now(unit);
      return true;
    }
  }
  return false;
}

void Pager::reap_saved_units(bool wait) {
  reap_freed_allocations();
  link_meter_.poll();
  if (!reclaimer_) reap_stall_timers();  // with one, the reclaimer reads them (time_stalls)
  // A device's saves run in turn on its copy-out stream, in the order they
  // are listed: once one is found still running, so are the later ones on
  // that device, and they are not asked (each query is a driver call, and
  // the scheduler's moves reap before each: asking every save in flight
  // made issuing a move cost a microsecond per save queued).
  std::uint64_t running = 0;  // a bit per device (below 64) with a save found running
  auto done = [&](Unit* unit) REQUIRES(mutex_) {
    const std::uint64_t bit = unit->device >= 0 && unit->device < 64 ? std::uint64_t{1} << unit->device : 0;
    if (!wait && (running & bit) != 0) return false;
    ContextScope in(driver_, device_state(unit->device).context);  // its save is on that device's copy stream
    if (!wait && unit->saved != nullptr && driver_.event_query(unit->saved) != CUDA_SUCCESS) {
      running |= bit;
      return false;
    }
    finish_unmap(unit, wait);
    return true;
  };
  saved_units_.erase(std::remove_if(saved_units_.begin(), saved_units_.end(), done), saved_units_.end());
}

CUresult Pager::take_chunks(DeviceState& state, std::size_t count, const Unit* keep, std::vector<Chunk>* chunks,
                            std::uint64_t* after_save, std::vector<std::uint64_t>* chunk_saves) {
  note_saved_pieces(state);
  std::vector<std::uint64_t> saves;  // each taken chunk's save
  const std::size_t largest = keep != nullptr ? keep->largest_block : 0;
  using Fit = ChunkPool::Fit;
  using Saves = ChunkPool::Saves;
  const auto take = [&](Fit fit, Saves which) {
    return state.pool.take(count, state.saves_done, chunks, &saves, largest, fit, which) == CUDA_SUCCESS;
  };
  // The room there is: free blocks, and what the cap has left to make.
  const auto room_enough = [&] { return state.pool.free_chunks() + state.pool.uncreated_chunks() >= count; };
  // Whole blocks that add up to the unit, all at once (ChunkPool::take), in
  // this order: in its own decomposition, free with their saves done or
  // made; in one block more than that; blocks no save reads made into its
  // sizes; any free blocks that add up, with their saves done; then blocks
  // a save may still read (the copy in waits for it on the device); else
  // more room is made. (Measured on ResNet-50 at half its peak on the
  // simulator, 2026-11-29: any free blocks before making blocks anew
  // fragmented the pool into small blocks, 143 ms a step against 99.)
  while (!take(Fit::exact, Saves::done)) {
    if (unmap_oldest_save(state)) continue;  // strict: its chunks come back
    if (room_enough()) {
      reap_saved_units(false);  // finished saves unmapped, so that no range maps a block released
      note_saved_pieces(state);
      if (take(Fit::near, Saves::done)) break;
      if (state.pool.reshape(count, state.saves_done, largest)) continue;
      if (take(Fit::any, Saves::done) || take(Fit::exact, Saves::any) || take(Fit::any, Saves::any)) break;
    }
    if (offload_victim(state, keep)) continue;
    // Nothing more may go, and the room there is lies in blocks of sizes
    // that do not serve, which saves may still read: those saves are waited
    // for, and the blocks made into the sizes missing.
    if (room_enough() && !saved_units_.empty()) {
      PhaseTimer timer(phases_, PagerPhase::wait_save);
      reap_saved_units(true);
      note_saved_pieces(state);
      if (state.pool.reshape(count, state.saves_done, largest)) continue;
    }
    ooms_.fetch_add(1, std::memory_order_relaxed);
    launch_thread().short_of_room = true;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (state.pool.free_chunks() < options_.spare_chunks) wake_reclaimer();
  // A caller that asks for no serial orders itself after the whole
  // copy-out stream (a new unit's `ready`, a synchronous copy there).
  if (after_save != nullptr) *after_save = saves.empty() ? 0 : *std::max_element(saves.begin(), saves.end());
  if (chunk_saves != nullptr) chunk_saves->swap(saves);
  return CUDA_SUCCESS;
}

CUresult Pager::map_chunks(Unit* unit) {
  PhaseTimer timer(phases_, PagerPhase::map);
  unit->home_runs.clear();
  CUresult result = map_runs(unit->device, unit->address, unit->chunks.data(), unit->chunks.size(), &unit->home_runs);
  // What was mapped, on an error too (home_runs holds the mappings made
  // before it), so that chunks / made is the chunks one call carried.
  home_mappings_.fetch_add(unit->home_runs.size(), std::memory_order_relaxed);
  chunks_mapped_.fetch_add(std::accumulate(unit->home_runs.begin(), unit->home_runs.end(), std::uint64_t{0},
                                           [](std::uint64_t sum, const Mapping& run) { return sum + run.chunks; }),
                           std::memory_order_relaxed);
  if (result == CUDA_SUCCESS) {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = unit->device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    result = counted_call(&host_path_, DriverWork::vmm,
                          [&] { return driver_.set_access(unit->address, unit->bytes, &access, 1); });
  }
  if (result == CUDA_SUCCESS) result = map_aliases(unit);  // the program's own mappings of its handle
  if (result != CUDA_SUCCESS) {
    unmap_home(unit);
    unmap_aliases(unit);
  }
  return result;
}

CUresult Pager::fetch(Unit* unit, LibraryCallScope* overwrite) {
  DeviceState& state = device_state(unit->device);
  if (const CUresult result = ready_device(unit->device); result != CUDA_SUCCESS) return result;
  ContextScope in(driver_, state.context);
  if (revive(state, unit)) return CUDA_SUCCESS;
  unmap_now(unit);  // wanted back before its offload was reaped: its range must be free first
  if (unit->stale_mapping) repair_stale_mapping(state, unit);
  std::vector<Chunk> chunks;
  std::uint64_t after_save = 0;
  std::vector<std::uint64_t> chunk_saves;
  if (const CUresult result = take_chunks(state, unit->bytes / kChunkBytes, unit, &chunks, &after_save, &chunk_saves);
      result != CUDA_SUCCESS) {
    return result;
  }
  unit->chunks = std::move(chunks);
  // The mapping is the driver work every fetch makes before its copy; the
  // room it takes may have cost more (blocks made, victims sent out), which
  // is not the fetch's own and not counted in its mean (LinkModel).
  const std::uint64_t mapping_began = host_path_.now();
  CUresult result = map_chunks(unit);
  const bool mapped = result == CUDA_SUCCESS;
  if (mapped) host_path_.move_driver_work(false, host_path_.now() - mapping_began);
  // What the call in `overwrite` writes before reading is not copied in.
  const LibraryCallScope::Range skip = skipped_on_fetch(unit, overwrite);
  // Nothing to copy and chunks no save still reads: usable at once, without
  // queueing behind the copy-in stream's prefetches.
  const bool ready_now = skip.bytes == unit->bytes && after_save <= state.saves_done;
  std::uint64_t read = 0;  // the copy's number among the reads of host buffers (CopyMarks)
  if (mapped && !ready_now) {
    // Each part after the save of the chunks it writes that may still be
    // read (its own save, whose bytes it reads, was waited for by
    // unmap_now): the chunks' last contents are saved before they are
    // overwritten. Nothing copied in: the unit's `ready` still waits for them all.
    if (skip.bytes == unit->bytes) order_after_save(state, after_save);
    PhaseTimer timer(phases_, PagerPhase::copy_in);
    result = copy_in_except(state, unit, skip, chunk_saves);
    if (result == CUDA_SUCCESS && skip.bytes < unit->bytes) read = state.fetch_marks.mark(driver_, state.to_device_stream);
  }
  CUevent ready = nullptr;
  if (result == CUDA_SUCCESS && !ready_now) result = record_on_stream(state.to_device_stream, &ready);
  if (result != CUDA_SUCCESS) {
    // The bytes stay on the host, where they were; the caller gets an
    // out-of-memory error it can handle, and a later attempt may succeed.
    VGPUMEM_LOG_WARN("cannot bring {} at {:#x} back to the device: error {}; it stays on the host",
                     format_bytes(unit->bytes), unit->seen_at(), driver_error(result));
    if (mapped) {
      drain_copy_stream(state);  // nothing may still be copying into the chunks
      unmap_home(unit);
      unmap_aliases(unit);
    }
    return_chunks(state, &unit->chunks);
    ooms_.fetch_add(1, std::memory_order_relaxed);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // The copy above may still read the buffer: an offload on this device that
  // takes it waits for that read; another device's waits (HostStore).
  // A buffer that still holds skipped bytes stays the call's until it ends.
  if (skip.bytes != 0) keep_skipped(*overwrite, unit, skip, read);
  back_on_device(state, unit, ready, /*keep_host=*/skip.bytes != 0, read);
  prefetches_.fetch_add(1, std::memory_order_relaxed);
  bytes_prefetched_.fetch_add(unit->bytes - skip.bytes, std::memory_order_relaxed);
  return CUDA_SUCCESS;
}

// Copies the unit's host bytes in on the copy-in stream, all but `skip`
// (offsets from the unit's start), a chunk piece at a time (kMovePieceBytes),
// each after the saves of its own chunks: the first piece may land while the
// save that frees the last one's room still runs.
CUresult Pager::copy_in_except(DeviceState& state, Unit* unit, LibraryCallScope::Range skip,
                               const std::vector<std::uint64_t>& chunk_saves) {
  const std::uint64_t copied = unit->bytes - skip.bytes;
  if (copied == 0) return CUDA_SUCCESS;
  CUevent timed_from = nullptr, timed_to = nullptr;
  const bool timed = link_meter_.begin(LinkMeter::kToDevice, &timed_from, &timed_to);  // the first copy alone
  std::uint64_t timed_bytes = 0;
  bool timed_recorded = false;
  const auto* host = static_cast<const unsigned char*>(unit->host);
  CUresult result = CUDA_SUCCESS;
  const auto copy = [&](std::uint64_t from, std::uint64_t to) {
    if (from >= to || result != CUDA_SUCCESS) return;
    const bool this_one_timed = timed && timed_bytes == 0;
    if (this_one_timed) driver_.event_record(timed_from, state.to_device_stream);
    result = driver_.copy_to_device_async(unit->address + from, host + from, to - from, state.to_device_stream);
    if (this_one_timed && result == CUDA_SUCCESS) {
      timed_bytes = to - from;
      timed_recorded = driver_.event_record(timed_to, state.to_device_stream) == CUDA_SUCCESS;
    }
  };
  for (std::uint64_t begin = 0; begin < unit->bytes && result == CUDA_SUCCESS; begin += kMovePieceBytes) {
    const std::uint64_t end = std::min(begin + kMovePieceBytes, unit->bytes);
    const std::uint64_t skip_begin = std::clamp(skip.address, begin, end), skip_end = std::clamp(skip.end(), begin, end);
    // Waited for even where all of the piece is skipped: the unit's `ready`,
    // after which the call overwrites it, must come after those saves too.
    std::uint64_t wait_for = 0;
    for (std::uint64_t chunk = begin / kChunkBytes; chunk < end / kChunkBytes && chunk < chunk_saves.size(); ++chunk) {
      wait_for = std::max(wait_for, chunk_saves[chunk]);
    }
    order_after_save(state, wait_for);
    copy(begin, skip_begin);
    copy(skip_end, end);
  }
  if (timed) link_meter_.end(LinkMeter::kToDevice, state.context, timed_from, timed_to, timed_bytes, timed_recorded);
  return result;
}

// A unit on the host is resident again, its work to wait for `ready` (null:
// nothing). Its host buffer goes back to the store: a copy on this device
// may still use it (the fetch's reading it, or a revived unit's save still
// writing it), so another device takes it only once this device's copy
// streams are drained (HostStore).
void Pager::back_on_device(DeviceState& state, Unit* unit, CUevent ready, bool keep_host, std::uint64_t read) {
  if (!keep_host) host_.give_back(unit->host, unit->bytes, unit->device, read);
  unit->host = nullptr;
  unit->used_by.store(0);
  set_ready(unit, ready);
  state.resident_bytes += unit->bytes;
  unit->state.store(Residency::resident);
  observer_.moved(unit->device, unit->span_at, unit->bytes, false);
  trace_resident(unit->device, state);
}

// Wanted back before its save was reaped: the range is still mapped on the
// chunks it gave back (fast mode) or kept (strict), and the device bytes
// there are its own until a chunk is reused, since anything that touched
// the unit since would have brought it back first. If none was reused, it is
// resident again as it stands: no copy in, and no wait for its save (which
// fetching would need, on the program's thread, before unmapping the range
// to map it again). The save still running only fills a host buffer nothing
// will read: the buffer goes back to the store, where the next to take it on
// this device is an offload, on the same copy-out stream, after that save.
// But it still reads the range: the range is not unmapped before it ends
// (Unit::revived_save; RevivalTest.AFreeOfARevivedUnitWaitsForTheSaveStillReadingIt).
bool Pager::revive(DeviceState& state, Unit* unit) {
  if (!unit->unmap_pending || unit->stale_mapping || !unit->aliases.empty() || unit->host == nullptr) return false;
  if (options_.check == CheckMode::fast) {
    if (unit->given_back.empty() || !state.pool.take_back(unit->given_back, unit->save_first, unit->save_serial)) {
      return false;
    }
    unit->chunks.swap(unit->given_back);
    unit->given_back.clear();
  } else if (unit->chunks.empty()) {
    return false;
  }
  saved_units_.erase(std::remove(saved_units_.begin(), saved_units_.end(), unit), saved_units_.end());
  unit->unmap_pending = false;
  if (unit->saved != nullptr) {
    // Still reading the range: its next unmap waits for it (unmap_home). A
    // save left by an earlier revival ran before it on the same stream.
    if (unit->revived_save != nullptr) driver_.event_destroy(unit->revived_save);
    unit->revived_save = std::exchange(unit->saved, nullptr);
  }
  // As it went out: a copy bringing it in may still be landing (its save
  // waited for that copy, and the save is not waited for here).
  CUevent arriving = std::exchange(unit->ready_at_save, nullptr);
  back_on_device(state, unit, arriving);
  if (arriving != nullptr) unit->ready_for.store(unit->ready_for_at_save);  // those streams waited already
  revived_.fetch_add(1, std::memory_order_relaxed);
  bytes_revived_.fetch_add(unit->bytes, std::memory_order_relaxed);
  VGPUMEM_LOG_DEBUG("{} at {:#x} wanted back before its save ended: resident again on its own chunks",
                    format_bytes(unit->bytes), unit->seen_at());
  return true;
}

// ---- pins and room -----------------------------------------------------------------------

bool Pager::pin(std::uint64_t address, CUresult* result) {
  Unit* unit = index_.lookup(address);
  if (unit == nullptr) return false;
  MutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, capture_open());
  // Whoever uses pinned memory is not seen: it must be there now, all of it.
  // Each piece is pinned as it comes, so the next cannot push it out.
  *result = CUDA_SUCCESS;
  std::size_t pinned = 0;
  for_each_piece(unit, [&](Unit* piece) {
    lock_is_held();
    if ((*result = make_resident_now(piece)) != CUDA_SUCCESS) return false;
    ++piece->pins;
    ++pinned;
    return true;
  });
  if (*result != CUDA_SUCCESS) {
    for_each_piece(unit, [&](Unit* piece) {
      if (pinned == 0) return false;
      --piece->pins;
      --pinned;
      return true;
    });
  }
  return true;
}

bool Pager::unpin(std::uint64_t address) {
  Unit* unit = index_.lookup(address);
  if (unit == nullptr) return false;
  MutexLock lock(mutex_);
  for_each_piece(unit, [](Unit* piece) {
    if (piece->pins > 0) --piece->pins;
    return true;
  });
  return true;
}

bool Pager::make_room(int device, std::uint64_t bytes) {
  MutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, capture_open());
  if (devices_.count(device) == 0) return false;
  DeviceState& state = device_state(device);
  ContextScope in(driver_, state.context);
  state.spares_wanted = false;  // the room is the program's now: the reclaimer must not take it back
  // A free chunk may still be mapped where an offload in flight reads it:
  // released then, its pages stay until that unmap, and the room is not
  // there yet. Every save is waited for and its range unmapped first.
  reap_saved_units(true);
  std::uint64_t released = state.pool.release_free(bytes);
  while (released < bytes && offload_cheapest_block(state)) {
    reap_saved_units(true);
    released += state.pool.release_free(bytes - released);
  }
  // No block can be emptied (a unit held or pinned on each): unit by unit,
  // in the policy's order, as the units' chunks were handed out.
  while (released < bytes && offload_victim(state, nullptr)) {
    reap_saved_units(true);  // the chunks are released, not reused: their saves must be done
    released += state.pool.release_free(bytes - released);
  }
  return released >= bytes;
}

// ---- streams and contexts the program destroys ---------------------------------------------

// No unit remembers `bits` any more: a stream that gets one next starts clean
// (it must wait for units still arriving, and it never used any).
void Pager::forget_stream_bits(std::uint64_t bits) {
  streams_to_time_.fetch_and(~bits, std::memory_order_relaxed);  // a new stream there starts untimed
  for (auto& [device, state] : devices_) {
    for (const auto& unit : state->units) {
      unit->used_by.fetch_and(~bits, std::memory_order_acq_rel);
      unit->ready_for.fetch_and(~bits, std::memory_order_acq_rel);
    }
  }
}

void Pager::stream_created(CUstream stream, unsigned flags, bool listed) {
  MutexLock lock(mutex_);
  if (!listed) {
    program_streams_.lost_track();
    return;
  }
  CUcontext context = nullptr;
  int device = -1;
  if (driver_.stream_get_context != nullptr && driver_.stream_get_context(stream, &context) == CUDA_SUCCESS &&
      driver_.context_get_device != nullptr) {
    ContextScope in(driver_, context);
    CUdevice its = -1;
    if (driver_.context_get_device(&its) == CUDA_SUCCESS) device = its;
  }
  program_streams_.created(stream, flags, context, device);  // device -1: waited for on every device
}

void Pager::stream_destroyed(CUstream stream) {
  MutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, capture_open());
  program_streams_.destroyed(stream);
  const std::uint64_t bit = streams_.find(stream);
  if (bit == 0) return;
  {
    // What it enqueued may still use units that name it: done before its
    // bit can name another stream (cuStreamDestroy itself does not wait).
    ContextScope in(driver_, streams_.named(static_cast<unsigned>(std::countr_zero(bit))).context);
    driver_.stream_synchronize(stream);
  }
  forget_stream_bits(bit);
  streams_.retire_stream(stream);
}

void Pager::context_destroyed(CUcontext context) {
  MutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, capture_open());
  {
    ContextScope in(driver_, context);
    driver_.context_synchronize();
    marks_.forget(context);  // its events go with it
  }
  reap_saved_units(false);
  for (auto& [device, state] : devices_) {
    if (state->context == context) retire_device_context(*state);
  }
  forget_stream_bits(streams_.retire_context(context));
  program_streams_.context_destroyed(context);
}

void Pager::primary_context_reset(int device) {
  CUcontext primary = nullptr;
  if (driver_.primary_context_retain == nullptr || driver_.primary_context_retain(&primary, device) != CUDA_SUCCESS) {
    return;
  }
  context_destroyed(primary);
}

// The pager's work in a context about to go: every copy waited for, every
// event resolved and destroyed, the copy stream too; ready_device makes new
// ones in the device's primary context on its next use.
void Pager::retire_device_context(DeviceState& state) {
  reap_saved_units(true);
  drain_copy_stream(state);
  ContextScope in(driver_, state.context);
  for (const auto& unit : state.units) {
    if (unit->ready != nullptr) set_ready(unit.get(), nullptr);  // arrived: its copy stream is drained
  }
  if (state.reclaim_mark != nullptr) driver_.event_destroy(state.reclaim_mark);
  state.reclaim_mark = nullptr;
  state.fetch_marks.retire(driver_);  // drained above: every read is done
  state.save_pieces.retire(driver_);  // and every save
  // The streams go with the context; the pager's handles must not outlive it.
  state.copy_stream = nullptr;
  state.to_device_stream = nullptr;
  state.context = nullptr;
}

// ---- reporting ---------------------------------------------------------------------------

void Pager::trace_resident(int device, DeviceState& state) {
  state.resident_peak = std::max(state.resident_peak, state.resident_bytes);
  observer_.resident_bytes(device, state.resident_bytes, ledger_.cap(device));
}

std::uint64_t Pager::resident_bytes(int device) const {
  MutexLock lock(mutex_);
  auto it = devices_.find(device);
  return it == devices_.end() ? 0 : it->second->resident_bytes;
}

std::uint64_t Pager::charged_in_use(int device) const {
  MutexLock lock(mutex_);
  const std::uint64_t counted = ledger_.usage(device).counted;
  auto it = devices_.find(device);
  const std::uint64_t idle = it == devices_.end() ? 0 : it->second->pool.free_bytes();
  return counted - std::min(idle, counted);
}

std::uint64_t Pager::idle_chunk_bytes(int device) const {
  MutexLock lock(mutex_);
  auto it = devices_.find(device);
  return it == devices_.end() ? 0 : it->second->pool.free_bytes();
}

// No driver call here: the summary is written at exit, when the driver (and
// the calling thread's own state in it) may already be torn down.
nlohmann::json Pager::host_time_summary() const {
  nlohmann::json parts = nlohmann::json::object();
  for (std::size_t i = 0; i < kPagerPhaseNames.size(); ++i) {
    parts[std::string(kPagerPhaseNames[i])] = phases_.ns(static_cast<PagerPhase>(i));
  }
  return parts;
}

nlohmann::json Pager::summary() const {
  MutexLock lock(mutex_);
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& [device, state] : devices_) {
    devices.push_back({{"device", device},
                       {"resident_bytes", state->resident_bytes},
                       {"resident_bytes_peak", state->resident_peak},
                       {"chunk_bytes", state->pool.created_bytes()},
                       {"blocks", state->pool.blocks()},
                       {"reshaped_blocks", state->pool.reshaped_blocks()},
                       {"free_chunk_bytes", state->pool.free_bytes()}});
  }
  return {{"policy", "lru"},
          {"victims",
           {{"order", victims_.load()->name()},
            {"taken", victims_taken_.load()},
            {"in_order", victims_in_order_.load()}}},
          {"offloads", offloads_.load()},
          {"scheduled_offloads", scheduled_offloads_.load()},
          {"scheduled_prefetches", scheduled_prefetches_.load()},
          {"scheduled_refused", scheduled_refused_.load()},
          {"prefetches", prefetches_.load()},
          {"revived", revived_.load()},
          {"bytes_revived", bytes_revived_.load()},
          {"overwritten_fetches", overwritten_fetches_.load()},
          {"bytes_not_fetched", bytes_not_fetched_.load()},
          {"overwrites_restored", overwrites_restored_.load()},
          {"bytes_offloaded", bytes_offloaded_.load()},
          {"bytes_prefetched", bytes_prefetched_.load()},
          {"context_synchronizations", context_syncs_.load()},
          {"frees_waiting",
           {{"for_program_streams", frees_waiting_for_program_.load()},
            {"for_whole_contexts", frees_waiting_for_contexts_.load()},
            {"streams_listed", program_streams_.size()},
            {"every_stream_listed", program_streams_.complete()}}},
          {"mappings", {{"made", home_mappings_.load()}, {"chunks", chunks_mapped_.load()}}},
          {"grace",
           {{"operations", grace_.operations()},
            {"kind", options_.grace == GraceKind::lend ? "lend" : "blanket"},
            {"lendings", lendings_.load()},
            {"lent_units", lent_units_.load()},
            {"lent_left_out", lent_left_out_.load()},
            {"evictions_inside", grace_evictions_.load()},
            {"planned_inside", planned_grace_evictions_.load()}}},
          {"stalled_operations", stalls_.load()},
          {"stall_ns", stall_ns_.load()},
          {"stalls_being_timed", stall_timers_being_timed()},
          {"capture_pinned_bytes", lifetime_pinned_bytes_[0].load()},
          {"ipc_pinned_bytes", lifetime_pinned_bytes_[1].load()},
          {"peer_shared_pinned_bytes", lifetime_pinned_bytes_[2].load()},
          {"handle_exported_pinned_bytes", lifetime_pinned_bytes_[3].load()},
          {"graph_node_pinned_bytes", lifetime_pinned_bytes_[4].load()},
          {"dma_buf_pinned_bytes", lifetime_pinned_bytes_[5].load()},
          {"pointer_tables", tables_.summary()},
          {"slow_path_ns", slow_path_ns_.load()},
          {"host_time_ns", host_time_summary()},
          {"paged_allocations", allocations_.size()},
          {"pieces", {{"piece_bytes", options_.piece_bytes}, {"allocations_made", allocations_in_pieces_}}},
          {"program_handles", {{"live", handles_.size()},
                               {"materialized", handles_materialized_},
                               {"neighbour_pins", adjacent_pinned_}}},
          {"host_pinned_bytes", host_.pinned_bytes()},
          {"host_pinned_bytes_peak", host_.pinned_peak()},
          {"ooms", ooms_.load()},
          {"unmaps_pending", saved_units_.size()},
          {"reclaimer", {{"running", reclaimer_ != nullptr},
                         {"passes", reclaimer_passes_.load()},
                         {"unmaps", reclaimer_unmaps_.load()},
                         {"chunks_created_ahead", chunks_created_ahead_.load()},
                         {"host_buffers_pinned_ahead", host_.pinned_ahead()}}},
          {"mover", mover_summary()},
          {"host_path", host_path_.summary({bytes_offloaded_.load() + bytes_prefetched_.load(),
                                            scheduled_prefetches_.load(), mover_ ? mover_->counts().busy_ns : 0,
                                            lock_calendar_ ? lock_calendar_->waited_ns()
                                                           : phases_.ns(PagerPhase::lock_wait)})},
          {"devices", devices}};
}

}  // namespace vgpumem::vmm
