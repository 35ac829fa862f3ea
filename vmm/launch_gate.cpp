// The launch path: before a kernel or copy is enqueued, every unit it names
// is held (Access) and, unless all of them are resident already and ready
// for its stream, made resident under the pager's lock. The fast path (all
// resident) takes no lock and allocates nothing: a granule-index lookup per
// argument word, one atomic increment per unit, two atomic loads per unit.
#include <algorithm>
#include <array>
#include <chrono>
#include <thread>

#include "common/clock.h"
#include "common/format_bytes.h"
#include "common/log.h"
#include "vmm/kernel_name.h"
#include "vmm/pager.h"
#include "vmm/pager_device_state.h"
#include "vmm/relaxed_capture_mode.h"

// Note [The fast path of a launch]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The launch path (`Pager::prepare`): scan the argument words, look each
// up, and for each unit touched bump its `launching` count and check
// `state == resident` and the stream's bit in `ready_for`; record the stream in
// `used_by` and the launch tick in `last_use`; forward the launch; drop the
// counts. An offload first moves the unit to *moving out* and then checks
// `launching` (both sequentially consistent), so a launch between its check and
// its enqueue is never offloaded under. No lock and no allocation (what it
// costs: docs/benchmarks.md, "What does the launch hook cost?"). A unit resident but
// whose arrival the stream has not waited for (a planned fetch's first use)
// has the stream wait for its `ready` event there, still without the lock
// (`Pager::order_unlocked`): the launch holds the unit, so no fetch can
// replace the event, and `set_ready` destroys a replaced one only once no
// launch counted in `ready_readers` still uses it. Anything not resident goes
// to the slow path under the pager's lock: fetch (offloading unlocked units for room,
// least recently used first or in the learned step's order:
// Note [Choosing a victim] in vmm/victim_policy.h), wait, pin, and on. "Least recently used" is exact
// within a thread: the launch tick is a shared window advanced once per 16
// launches of a thread, plus the launch's place in that window; the victim is
// popped from a heap built over the candidates (linear, on the slow path).

namespace vgpumem::vmm {

namespace {
thread_local LaunchThread t_launch;
}  // namespace

// Out of line, or inlining it would bring back the lookup at every use.
[[gnu::noinline]] LaunchThread& launch_thread() { return t_launch; }

// The LRU clock: every thread advances the shared window on one launch in
// 16 and reads it on the others, so launches from many threads do not all
// write one cache line; the launch's place in its thread's window is the low
// bits, so one thread's order is exact (ties would make the victim choice
// arbitrary among everything used in the same window).
std::uint64_t Pager::next_tick(LaunchThread& thread) {
  const std::uint32_t place = ++thread.launches & kLastPlace;
  const std::uint64_t window = place == 0 ? tick_.fetch_add(1, std::memory_order_relaxed) + 1
                                          : tick_.load(std::memory_order_relaxed);
  return tick_at(window, place);
}

// Records that `unit` is used on the stream of `bit` at `tick`, writing only
// what changes (the unit's line is shared by every thread that uses it).
void Pager::note_use(Unit* unit, std::uint64_t bit, std::uint64_t tick) {
  if ((unit->used_by.load(std::memory_order_relaxed) & bit) == 0) {
    unit->used_by.fetch_or(bit, std::memory_order_release);
  }
  if (unit->last_use.load(std::memory_order_relaxed) != tick) unit->last_use.store(tick, std::memory_order_relaxed);
}

// Read after the unit is held: an offload sets `moving_out` before it looks
// at `launching` (both sequentially consistent), so either this sees the
// unit leave or the offload sees the hold and leaves it alone.
bool Pager::fast_path(Unit* unit, std::uint64_t bit) const {
  return unit->state.load(std::memory_order_seq_cst) == Residency::resident &&
         (unit->ready_for.load(std::memory_order_acquire) & bit) != 0;
}

CUresult Pager::prepare(const std::uint64_t* words, std::size_t count, CUstream stream, bool per_thread,
                        Access& access, const Operation& op) {
  const std::size_t from = access.size();
  add_named_by_words(words, count, access);
  return settle(access, from, stream, per_thread, op);
}

// Every unit a word points into (every piece of an allocation made in
// pieces), and (one level) what the tables among them point to.
void Pager::add_named_by_words(const std::uint64_t* words, std::size_t count, Access& access) {
  const GranuleIndex::Window window = index_.window();
  bool into_table = false;  // a word points into a registered table or a pinned host buffer
  for (std::size_t i = 0; i < count; ++i) {
    if (Unit* unit = index_.lookup(window, words[i])) {
      // The identity names the allocation, not the piece the word lands in.
      const Unit* named = unit->first_piece != nullptr ? unit->first_piece : unit;
      access.mix_operand(named, words[i] - named->address);
      access.names_.add_word(words[i]);
      if (holds_small_allocations(*unit)) access.names_.add_small_cell(words[i]);
      into_table |= add_whole(unit, access);
    } else {
      into_table |= tables_.may_point_into_host(words[i]);
    }
  }
  if (into_table) follow_tables(window, words, count, access);
}

// What the tables the words point into point to joins the operation, held
// with its own words (PointerTables). Targets freed since name nothing.
void Pager::follow_tables(const GranuleIndex::Window& window, const std::uint64_t* words, std::size_t count,
                          Access& access) {
  thread_local std::vector<std::uint64_t> targets;  // the thread's: a steady state allocates nothing
  targets.clear();
  tables_.follow(words, count, targets);
  for (const std::uint64_t target : targets) {
    if (Unit* unit = index_.lookup(window, target)) add_whole(unit, access);
  }
}

// A table anywhere in the allocation counts: the word may point into one
// piece and the table it points into start in another.
bool Pager::add_whole(Unit* unit, Access& access) {
  if (unit->first_piece == nullptr) {
    access.add(unit);
    return unit->tables.load(std::memory_order_acquire) != 0;
  }
  bool tables = false;
  for (Unit* piece = unit->first_piece; piece != nullptr; piece = piece->next_piece) {
    access.add(piece);
    tables |= piece->tables.load(std::memory_order_acquire) != 0;
  }
  return tables;
}

CUresult Pager::prepare_range(std::uint64_t address, std::uint64_t bytes, CUstream stream, bool per_thread,
                              Access& access, const Operation& op, Extent extent) {
  const std::size_t from = access.size();
  add_named_by_range(address, bytes, access, extent);
  return settle(access, from, stream, per_thread, op);
}

// Every unit [address, address + bytes) crosses (`whole`: with the other
// pieces of their allocations).
void Pager::add_named_by_range(std::uint64_t address, std::uint64_t bytes, Access& access, Extent extent) {
  const std::uint64_t end = address + bytes;
  std::uint64_t at = address;
  while (at < end) {
    std::uint64_t next = (at | (GranuleIndex::kGranule - 1)) + 1;
    if (Unit* unit = index_.lookup(at)) {
      access.mix_operand(unit, at - unit->address);
      if (extent == Extent::exact || unit->first_piece == nullptr) {
        access.add(unit);
      } else {
        add_whole(unit, access);
        const Unit* last = unit;
        while (last->next_piece != nullptr) last = last->next_piece;
        next = std::max(next, last->address + last->bytes);  // every piece is in already
      }
    }
    at = next;
  }
  access.identity_.mix(bytes);
}

CUresult Pager::prepare_everything(int device, CUstream stream, bool per_thread, Access& access,
                                   const Operation& op) {
  const std::size_t from = access.size();
  access.names_.named_everything = true;  // no table it writes can be lent: its units are stamped
  {
    MutexLock lock(mutex_);
    if (auto it = devices_.find(device); it != devices_.end()) {
      for (const auto& unit : it->second->units) {
        if (!unit->retired) access.add(unit.get());
      }
    }
  }
  return settle(access, from, stream, per_thread, op);
}

CUresult Pager::settle(Access& access, std::size_t from, CUstream stream, bool per_thread, const Operation& op) {
  // Torture offloads everything else before every operation, even one that
  // names no paged memory: it may reach some unseen.
  if (access.size() == from && options_.check != CheckMode::torture) return CUDA_SUCCESS;
  access.drop_duplicates_from(from);
  access.hold_new();
  const CUstream named = canonical(stream, per_thread);
  if (capture_open() && capturing(named)) {
    return pin_units_for_life(access.data() + from, access.size() - from, LifetimePin::captured);
  }
  CUcontext current = nullptr;
  if (StreamRegistry::needs_current_context(stream, per_thread)) driver_.context_get_current(&current);
  const std::uint64_t bit = streams_.bit_for(stream, per_thread, current);
  LaunchThread& thread = launch_thread();
  const std::uint64_t tick = next_tick(thread);
  if (AccessFeed* feed = feed_.load(std::memory_order_acquire)) {
    access.note(feed, named, bit, tick, op, thread, streams_to_time_);
  }
  const bool timed_next = access.feed_ != nullptr && feed_times_next(thread, *access.feed_, bit);
  const std::uint64_t stamp = grace_.count(bit);  // before any victim is chosen for it
  const std::size_t lent_from = access.size();
  if (access.names_.names_small() && lending_.window() != 0) lend(access, stamp);
  // Whether a unit needs the slow path: one resident but not yet waited for
  // on this stream (a planned fetch's first use) has the stream wait here,
  // without the pager's lock, where the mover or the reclaimer may hold it
  // for the driver's calls (the H200's launch thread waited 57 ms a step
  // for it).
  const auto needs_slow_path = [&] {
    if (options_.check == CheckMode::torture) return true;
    for (std::size_t i = from; i < access.size(); ++i) {
      Unit* unit = access.at(i);
      if (!fast_path(unit, bit) && !order_unlocked(unit, named, bit)) return true;
    }
    return false;
  };
  bool slow = needs_slow_path();
  if (mover_ && slow) {
    wait_for_the_mover(access, from);
    slow = needs_slow_path();
  } else if (mover_ && driver_.host_handoff != nullptr) {
    note_mover_arrivals(access, from);  // a simulated driver's clock only
  }
  if (slow) {
    const std::uint64_t started = monotonic_ns();
    const std::uint64_t started_on_clock = host_path_.simulated() ? host_path_.now() : started;
    UniqueMutexLock lock(mutex_);
    phases_.add(PagerPhase::lock_wait, monotonic_ns() - started);
    RelaxedCaptureMode relaxed(driver_, capture_open());
    // Room other launches hold only until they are enqueued (their own
    // units, and what they were lent) is not the cap: wait for it a while
    // before the program is told it is out of memory.
    CUresult result = CUDA_SUCCESS;
    for (std::uint64_t wait_us = 10;; wait_us = std::min<std::uint64_t>(2 * wait_us, 1000)) {
      const bool last_try = monotonic_ns() - started > kHeldRoomWaitNs;
      thread.short_of_room = false;
      result = make_held_resident(access, from, lent_from, named, bit, op, last_try);
      // Only a try that found nothing to evict is tried again (what can never
      // fit under the cap was refused, logged, at once; a failed copy is the
      // program's, logged too).
      if (result != CUDA_ERROR_OUT_OF_MEMORY || last_try || !thread.short_of_room || !fits_under_caps(access)) break;
      absorb_oom();  // the try's; not the program's
      if (!others_hold_units(access)) {  // nothing to wait for: the program's, and said so
        result = make_held_resident(access, from, lent_from, named, bit, op, true);
        break;
      }
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(wait_us));
      lock.lock();
    }
    const std::uint64_t ended = monotonic_ns();
    slow_path_ns_.fetch_add(ended - started, std::memory_order_relaxed);
    host_path_.slow_path((host_path_.simulated() ? host_path_.now() : ended) - started_on_clock);
    if (result != CUDA_SUCCESS) return result;
  }
  // Under lending only an operation whose names could not be kept (too many
  // words, or every unit) leaves the blanket grace's stamp on its units.
  const bool stamps = options_.grace == GraceKind::blanket || access.names_.overflowed();
  for (std::size_t i = from; i < access.size(); ++i) {
    note_use(access.at(i), bit, tick);
    if (stamps) LaunchGrace::stamp(*access.at(i), stamp);
  }
  if (access.names_.names_small()) {
    lending_.keep(LaunchGrace::stream_of_stamp(stamp), LaunchGrace::sequence_of_stamp(stamp), access.names_);
  }
  access.names_.begin();  // a second range the operation settles (a copy's, a tensor map's) names anew
  if (timed_next && !access.timed()) {
    // A kernel the feed times off the stream (CUPTI) needs no marks on it:
    // its launcher pushes a launch id instead. Copies and memsets have no
    // kernel record, so they are always marked.
    if (op.function != nullptr && access.feed_->times_kernels_by_launch_id()) {
      access.time_by_launch_id();
      if (access.feed_->marks_kernel_too(bit)) access.time(this, mark(named));
    } else {
      access.time(this, mark(named));
    }
  }
  return CUDA_SUCCESS;
}

// Under the lock, with every unit of the operation held: first what is on
// the host comes back (on the copy streams), and only when all of it could,
// the operation's stream is made to wait for what is still arriving.
CUresult Pager::make_held_resident(Access& access, std::size_t from, std::size_t lent_from, CUstream stream,
                                   std::uint64_t bit, const Operation& op, bool last_try) {
  {
    PhaseTimer timer(phases_, PagerPhase::reap);
    // Finished saves' ranges are the reclaimer's to unmap (fast mode gave
    // their chunks back already, and a unit wanted back unmaps its own): an
    // unmap here is driver work on the program's thread, behind the driver's
    // lock. Stream-ordered frees reached are room, and taken here.
    if (reclaimer_ && options_.check == CheckMode::fast) {
      reap_freed_allocations();
    } else {
      reap_saved_units(false);
    }
  }
  if (lent_from < access.size() && !fits_under_caps(access)) {
    // What the operation was lent cannot be resident beside what it names:
    // it goes without, as a consumer past the grace does (what it reads
    // through the table is then not the pager's to keep; strict mode makes
    // such a read fault).
    lent_left_out_.fetch_add(1, std::memory_order_relaxed);
    access.drop_from(lent_from);
  }
  if (const CUresult result = refuse_unfit(access, op); result != CUDA_SUCCESS) return result;
  if (options_.check == CheckMode::torture) offload_all_unheld();
  for (std::size_t i = 0; i < lent_from; ++i) {
    if (const CUresult result = bring_in(access.at(i), op, last_try); result != CUDA_SUCCESS) return result;
  }
  // What the operation was lent comes after its own, which it can never
  // displace (they are held); where other threads' held work leaves it no
  // room, the operation goes without it rather than fail.
  for (std::size_t i = lent_from; i < access.size(); ++i) {
    Unit* unit = access.at(i);
    if (unit->retired || unit->state.load() != Residency::on_host) continue;
    host_path_.fetched_on_demand();
    const CUresult result = fetch(unit, library_call_on_this_thread());
    if (result == CUDA_ERROR_OUT_OF_MEMORY) {
      absorb_oom();  // the fetch's; not the program's
      lent_left_out_.fetch_add(1, std::memory_order_relaxed);
      access.drop_from(lent_from);
      break;
    }
    if (result != CUDA_SUCCESS) return result;
  }
  PhaseTimer timer(phases_, PagerPhase::order);
  for (std::size_t i = from; i < access.size(); ++i) {
    if (const CUresult result = order_stream(access.at(i), stream, bit); result != CUDA_SUCCESS) return result;
  }
  return CUDA_SUCCESS;
}

// The bytes of the units in `access` per device, each unit once: an
// operation needs them resident at once.
std::array<std::uint64_t, kMaxDevices> Pager::needed_per_device(Access& access) {
  std::array<std::uint64_t, kMaxDevices> needed{};
  for (std::size_t i = 0; i < access.size(); ++i) {
    Unit* unit = access.at(i);
    if (unit->retired || unit->marked || unit->device < 0 || unit->device >= kMaxDevices) continue;
    unit->marked = true;
    needed[static_cast<std::size_t>(unit->device)] += unit->bytes;
  }
  for (std::size_t i = 0; i < access.size(); ++i) access.at(i)->marked = false;
  return needed;
}

// The first device whose cap `needed` exceeds, or -1. Only a device the
// operation names is asked for its cap: asking resolves it, and the trace
// lists every device whose cap was resolved.
int Pager::device_over_cap(const std::array<std::uint64_t, kMaxDevices>& needed) {
  for (int device = 0; device < kMaxDevices; ++device) {
    const std::uint64_t bytes = needed[static_cast<std::size_t>(device)];
    if (bytes == 0) continue;
    const std::uint64_t cap = ledger_.cap(device);
    if (cap != kUncapped && bytes > cap) return device;
  }
  return -1;
}

bool Pager::fits_under_caps(Access& access) { return device_over_cap(needed_per_device(access)) < 0; }

// An operation whose units need more than a device's cap at once can never
// run: refused before anything moves.
CUresult Pager::refuse_unfit(Access& access, const Operation& op) {
  const std::array<std::uint64_t, kMaxDevices> needed = needed_per_device(access);
  const int device = device_over_cap(needed);
  if (device < 0) return CUDA_SUCCESS;
  ooms_.fetch_add(1, std::memory_order_relaxed);
  VGPUMEM_LOG_ERROR("{} needs {} of paged memory resident at once on device {}, more than its cap of {}: "
                    "CUDA_ERROR_OUT_OF_MEMORY, nothing enqueued",
                    operation_name(op), format_bytes(needed[static_cast<std::size_t>(device)]), device,
                    format_bytes(ledger_.cap(device)));
  return CUDA_ERROR_OUT_OF_MEMORY;
}

// Lending (vmm/table_lending.h): what the recent operations of the stream
// that named one of this operation's small cells named joins it, held.
// `stamp`: the operation's, from the grace's counter (its stream and number).
void Pager::lend(Access& access, std::uint64_t stamp) {
  const std::size_t lent_from = access.size();
  const GranuleIndex::Window window = index_.window();
  const std::size_t lenders =
      lending_.lend(LaunchGrace::stream_of_stamp(stamp), LaunchGrace::sequence_of_stamp(stamp), access.names_,
                    [&](std::uint64_t word) {
                      if (Unit* unit = index_.lookup(window, word)) add_whole(unit, access);
                    });
  if (lenders == 0) return;
  access.drop_duplicates_from(lent_from);
  access.hold_new();
  lendings_.fetch_add(1, std::memory_order_relaxed);
  lent_units_.fetch_add(access.size() - lent_from, std::memory_order_relaxed);
}

// Under the lock: whether a launch other than `access`'s holds a unit (it
// is between its check and its enqueue, and lets go then).
bool Pager::others_hold_units(Access& access) {
  for (std::size_t i = 0; i < access.size(); ++i) access.at(i)->marked = true;
  bool others = false;
  for (const auto& [device, state] : devices_) {
    for (const auto& unit : state->units) {
      if (!unit->marked && unit->launching.load(std::memory_order_relaxed) != 0) others = true;
    }
  }
  for (std::size_t i = 0; i < access.size(); ++i) access.at(i)->marked = false;
  return others;
}

CUresult Pager::bring_in(Unit* unit, const Operation& op, bool log) {
  if (unit->retired || unit->state.load() != Residency::on_host) return CUDA_SUCCESS;
  host_path_.fetched_on_demand();
  const CUresult result = fetch(unit, library_call_on_this_thread());
  if (result == CUDA_ERROR_OUT_OF_MEMORY && (log || !launch_thread().short_of_room)) {
    VGPUMEM_LOG_ERROR("{} cannot have {} at {:#x} back on device {}: what else it names, and what other work holds "
                      "or pins, fill the cap of {}: CUDA_ERROR_OUT_OF_MEMORY, nothing enqueued",
                      operation_name(op), format_bytes(unit->bytes), unit->seen_at(), unit->device,
                      format_bytes(ledger_.cap(unit->device)));
  }
  return result;
}

// The stream waits for a unit still arriving (or whose chunks an offload is
// still reading); a unit that has arrived needs nothing.
CUresult Pager::order_stream(Unit* unit, CUstream stream, std::uint64_t bit) {
  if (unit->retired || unit->ready == nullptr || (unit->ready_for.load() & bit) != 0) return CUDA_SUCCESS;
  if (driver_.event_query(unit->ready) == CUDA_SUCCESS) {
    set_ready(unit, nullptr);
    return CUDA_SUCCESS;
  }
  if (const CUresult result = wait_for_arrival(stream, unit->ready); result != CUDA_SUCCESS) return result;
  // The per-thread default stream is a different stream on every thread: it
  // never counts as having waited.
  if (bit != StreamRegistry::kUnnamedBit) unit->ready_for.fetch_or(bit);
  return CUDA_SUCCESS;
}

// Held, the unit stays resident and its `ready` is replaced by no fetch;
// only set_ready(nullptr) may replace it, once its copy is done, and it
// destroys the event only after every launch counted in `ready_readers`
// has made its wait (both sides sequentially consistent: either the launch
// reads the new event, or set_ready sees the launch counted).
bool Pager::order_unlocked(Unit* unit, CUstream stream, std::uint64_t bit) {
  if (unit->retired || unit->state.load(std::memory_order_seq_cst) != Residency::resident || capture_open()) {
    return false;
  }
  unit->ready_readers.fetch_add(1, std::memory_order_seq_cst);
  const CUevent ready = unit->ready.load(std::memory_order_seq_cst);
  const bool waited = ready == nullptr || wait_for_arrival(stream, ready) == CUDA_SUCCESS;
  unit->ready_readers.fetch_sub(1, std::memory_order_release);
  if (!waited) return false;
  if (bit != StreamRegistry::kUnnamedBit) unit->ready_for.fetch_or(bit);
  return true;
}

CUresult Pager::wait_for_arrival(CUstream stream, CUevent ready) {
  // The stream's time at the wait, for the stall's length (time_stall).
  CUevent reached = nullptr;
  bool room = false;
  if (driver_.event_elapsed != nullptr) {
    MutexLock lock(stall_timers_mutex_);
    room = stall_timers_.size() < kMaxStallTimers;
  }
  if (room && (driver_.event_create(&reached, CU_EVENT_BLOCKING_SYNC) != CUDA_SUCCESS ||
               driver_.event_record(reached, stream) != CUDA_SUCCESS)) {
    if (reached != nullptr) driver_.event_destroy(reached);
    reached = nullptr;
  }
  if (const CUresult result = driver_.stream_wait_event(stream, ready, 0); result != CUDA_SUCCESS) {
    if (reached != nullptr) driver_.event_destroy(reached);
    return result;
  }
  stalls_.fetch_add(1, std::memory_order_relaxed);  // this work waits for the unit to arrive
  if (reached != nullptr) time_stall(stream, reached);
  return CUDA_SUCCESS;
}

// VGPUMEM_CHECK=torture: everything no operation holds goes to the host, its
// range unmapped before the operation is enqueued, so an access no hook saw
// faults at once.
void Pager::offload_all_unheld() {
  for (auto& [device, state] : devices_) {
    for (const auto& unit : state->units) {
      if (!unit->retired && unit->pins == 0 && unit->state.load() == Residency::resident &&
          unit->launching.load() == 0 && !grace_.protects(*unit)) {
        offload(*state, unit.get());
      }
    }
  }
  reap_saved_units(true);
}

std::string Pager::operation_name(const Operation& op) const {
  if (op.function == nullptr) return op.api[0] != '\0' ? std::string(op.api) : std::string("an operation");
  return fmt::format("kernel {}{}{}", kernel_name(driver_, op.function), op.api[0] != '\0' ? " via " : "", op.api);
}

bool Pager::capturing(CUstream stream) const {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return driver_.stream_is_capturing != nullptr && driver_.stream_is_capturing(stream, &status) == CUDA_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

bool Pager::stream_capturing(CUstream stream, bool per_thread) const {
  return capturing(canonical(stream, per_thread));
}

}  // namespace vgpumem::vmm
