#include "scheduler/access_log.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "vmm/stream_registry.h"

namespace vgpumem::scheduler {

namespace {

// The last whole iterations a stream's log followed since its last lock, as
// the log's consumer counted their operations: a ring that the holder of
// the log writes at each iteration's end (a period of one operation ends
// one at every launch, so no lock is taken) and summary() reads from any
// thread, again if the holder wrote meanwhile (a sequence lock: `version`
// is odd while it writes, and each word is stored with release and loaded
// with acquire, so a reader that sees a word of a write sees its version
// change too; every word is atomic, so a torn read is retried, never a
// race).
class RecentIterations {
 public:
  static constexpr std::size_t kSize = AccessLog::kRecentIterations;

  void restart() { write([this] { count_.store(0, std::memory_order_release); }); }
  // `paged`: the pager's host work during the iteration, and its length
  // (`clock_ns`: the time between its start and its end).
  void note(std::uint64_t serial, std::uint64_t operations, std::uint64_t followed, std::uint64_t strayed,
            const vmm::HostPathCounts& paged) {
    write([&] {
      const std::size_t at = next_.load(std::memory_order_relaxed);
      Entry& entry = ring_[at];
      entry.serial.store(serial, std::memory_order_release);
      entry.operations.store(operations, std::memory_order_release);
      entry.followed.store(followed, std::memory_order_release);
      entry.strayed.store(strayed, std::memory_order_release);
      entry.paging_ns.store(paged.program_paging_ns, std::memory_order_release);
      entry.vmm_calls.store(paged.program_vmm_calls, std::memory_order_release);
      entry.moved_bytes.store(paged.moved_bytes, std::memory_order_release);
      entry.on_demand.store(paged.fetches_on_demand, std::memory_order_release);
      entry.planned.store(paged.fetches_planned, std::memory_order_release);
      entry.host_ns.store(paged.clock_ns, std::memory_order_release);
      next_.store((at + 1) % kSize, std::memory_order_release);
      count_.store(std::min(count_.load(std::memory_order_relaxed) + 1, kSize), std::memory_order_release);
    });
  }
  // Oldest first: [{"serial", "operations", "followed", "strayed",
  // "program_paging_ns", "program_vmm_calls", "moved_bytes",
  // "fetches_on_demand", "fetches_planned", "host_ns"}, ...].
  nlohmann::json read() const {
    nlohmann::json out = nlohmann::json::array();
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const std::uint64_t before = version_.load(std::memory_order_acquire);
      if ((before & 1) != 0) continue;  // being written
      out = nlohmann::json::array();
      const std::size_t next = next_.load(std::memory_order_acquire), count = count_.load(std::memory_order_acquire);
      for (std::size_t k = 0; k < count; ++k) {
        const Entry& it = ring_[(next + kSize - count + k) % kSize];
        out.push_back({{"serial", it.serial.load(std::memory_order_acquire)},
                       {"operations", it.operations.load(std::memory_order_acquire)},
                       {"followed", it.followed.load(std::memory_order_acquire)},
                       {"strayed", it.strayed.load(std::memory_order_acquire)},
                       {"program_paging_ns", it.paging_ns.load(std::memory_order_acquire)},
                       {"program_vmm_calls", it.vmm_calls.load(std::memory_order_acquire)},
                       {"moved_bytes", it.moved_bytes.load(std::memory_order_acquire)},
                       {"fetches_on_demand", it.on_demand.load(std::memory_order_acquire)},
                       {"fetches_planned", it.planned.load(std::memory_order_acquire)},
                       {"host_ns", it.host_ns.load(std::memory_order_acquire)}});
      }
      if (version_.load(std::memory_order_relaxed) == before) break;
    }
    return out;
  }

 private:
  struct Entry {
    std::atomic<std::uint64_t> serial{0}, operations{0}, followed{0}, strayed{0};
    std::atomic<std::uint64_t> paging_ns{0}, vmm_calls{0}, moved_bytes{0}, on_demand{0}, planned{0};
    std::atomic<std::uint64_t> host_ns{0};  // the iteration's time on the issuing thread (HostPathCounts::clock_ns)
  };
  template <typename Change>
  void write(Change change) {
    const std::uint64_t version = version_.load(std::memory_order_relaxed);
    version_.store(version + 1, std::memory_order_relaxed);  // before each word: they are stored with release
    change();
    version_.store(version + 2, std::memory_order_release);
  }

  std::array<Entry, kSize> ring_;
  std::atomic<std::size_t> next_{0}, count_{0};
  std::atomic<std::uint64_t> version_{0};
};

}  // namespace

struct AccessLog::StreamLog : FollowedStream {
  explicit StreamLog(const IterationDetector::Options& detector_options) : FollowedStream(detector_options) {}

  // The holder's alone.
  std::uint64_t since_timed = 0;
  RecordedIteration current;
  // Bit p: the operation at phase p of the last recorded iteration was not
  // a kernel (a copy, a memset); known once an iteration of the period in
  // force has been recorded whole (until then every kernel is marked).
  std::vector<bool> not_kernel_at;
  bool ops_known = false;
  // The recording is tentative (start_tentative): of a step not yet named.
  bool tentative = false;
  // The consumer's counts as the last boundary was noted (note_boundary),
  // and the last iteration whose end was.
  std::uint64_t followed_at_boundary = 0, strayed_at_boundary = 0, operations_at_boundary = 0, noted_serial = 0,
                noted_new_kinds = 0;
  vmm::HostPathCounts paged_at_boundary;  // the pager's counts then

  // Written by the holder, read by summary() from any thread.
  std::atomic<std::uint64_t> published{0}, dropped{0}, locks{0}, breaks{0};
  // Locks that made a step kind, that came back to one (IterationDetector::returns),
  // and the kinds it knows now.
  std::atomic<std::uint64_t> new_kinds{0}, returns{0}, kinds_known{0};
  std::atomic<std::uint64_t> ended{0};  // whole iterations followed, kept or not: the last one's serial
  std::atomic<std::uint64_t> locked_period{0}, iterations{0};  // of the last lock, kept after it breaks
  std::atomic<bool> locked{false};
  std::atomic<std::uint64_t> operations_at_break{0};  // `operations` when the last break came
  std::atomic<std::uint64_t> timed_from{0};  // request_timing: time the iteration of this serial (0: none)

  std::mutex published_mutex;  // once per iteration, and readers
  std::shared_ptr<const RecordedIteration> last;
  bool last_read = false;  // somebody has read `last` (last_iteration)
  std::shared_ptr<RecordedIteration> spare;  // the one before: reused once no reader holds it
  // Iterations a reader still held when their turn to be reused came: kept
  // until it lets go, so that their timing marks go back to the pool (a
  // timed step dropped with its marks would leak an event per operation).
  std::vector<std::shared_ptr<RecordedIteration>> held_by_readers;
  RecentIterations recent;
};

namespace {

// The thread's log of its unnamed streams for the AccessLog that asked
// last: one slot (a process has one log; tests make several, one after
// another).
struct ThreadSlot {
  const void* owner = nullptr;
  void* log = nullptr;
};
thread_local ThreadSlot t_slot;

std::atomic<std::uint64_t> g_logs{0};

// What an operation that went unseen counts as to the detector: an identity
// unlike any other, so the period in force breaks.
constexpr std::uint64_t kUnseenOperation = 0;

}  // namespace

AccessLog::AccessLog(Options options, vmm::PagerControl* marks)
    : options_(options), marks_(marks), serial_(g_logs.fetch_add(1, std::memory_order_relaxed) + 1) {}

AccessLog::~AccessLog() {
  if (t_slot.owner == this) t_slot = {};
}

FollowedStream& AccessLog::stream_log(unsigned bit) {
  static_assert(kNamedStreams == vmm::StreamRegistry::kNamed, "a log for each bit the registry names a stream by");
  std::lock_guard lock(logs_mutex_);
  if (FollowedStream* made = streams_[bit].load(std::memory_order_relaxed)) return *made;  // by another thread meanwhile
  logs_.push_back(std::make_unique<StreamLog>(options_.detector));
  streams_[bit].store(logs_.back().get(), std::memory_order_release);
  return *logs_.back();
}

AccessLog::StreamLog& AccessLog::thread_log() {
  if (t_slot.owner == this) return *static_cast<StreamLog*>(t_slot.log);
  std::lock_guard lock(logs_mutex_);
  logs_.push_back(std::make_unique<StreamLog>(options_.detector));
  ++thread_logs_;
  t_slot = {this, logs_.back().get()};
  return *logs_.back();
}

FollowedStream& AccessLog::thread_log_for(vmm::FeedThreadSlot* slot) {
  FollowedStream& log = thread_log();
  if (slot != nullptr) *slot = vmm::FeedThreadSlot{serial_, &log};
  return log;
}

AccessLog::StreamLog* AccessLog::find_log(std::uint64_t stream_bit) {
  const unsigned bit = static_cast<unsigned>(std::countr_zero(stream_bit));
  if (bit >= kNamedStreams) return &thread_log();
  return static_cast<StreamLog*>(streams_[bit].load(std::memory_order_acquire));
}

StreamPosition AccessLog::unseen(FollowedStream& log, const vmm::AccessRecord& record) noexcept {
  log.missed.fetch_add(1, std::memory_order_relaxed);  // (contended: rare)
  release_marks(record);
  return {};
}

void AccessLog::changed_hands(FollowedStream& followed, const vmm::AccessRecord& record) noexcept {
  StreamLog& log = static_cast<StreamLog&>(followed);
  if (record.thread_slot != log.writer) {
    StreamCounts::bump(log.handoffs);
    log.writer = record.thread_slot;
  }
  const std::uint64_t missed = log.missed.load(std::memory_order_relaxed);
  if (missed == log.missed_noted) return;
  // Operations of this stream went by unseen while another thread held the
  // log: what is being followed is not the stream's sequence.
  log.missed_noted = missed;
  const IterationDetector::Event event = log.detector.observe(kUnseenOperation);
  if (event == IterationDetector::Event::broken) note_break(log);
  if (event == IterationDetector::Event::locked) note_lock(log);  // (a kind named by chance: recorded from its start)
  drop_iteration(log);
}

void AccessLog::note_lock(StreamLog& log) {
  ++log.lock_count;
  log.kind = log.detector.kind();
  log.locks.fetch_add(1, std::memory_order_relaxed);
  if (log.detector.new_kind()) log.new_kinds.fetch_add(1, std::memory_order_relaxed);
  log.returns.store(log.detector.returns(), std::memory_order_relaxed);
  log.kinds_known.store(log.detector.kinds().size(), std::memory_order_relaxed);
  log.locked_period.store(log.detector.period(), std::memory_order_relaxed);
  log.locked.store(true, std::memory_order_relaxed);
  // The first whole iteration of a kind is timed, so that the planner has
  // it; a kind come back to is timed again only if it never had one (its
  // first lock broke before an iteration ended).
  if (!log.detector.kinds().was_timed(log.kind)) log.since_timed = options_.timing_every;
}

void AccessLog::note_break(StreamLog& log) {
  log.breaks.fetch_add(1, std::memory_order_relaxed);
  log.locked.store(false, std::memory_order_relaxed);
  log.operations_at_break.store(log.operations.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

// Whether the stream's last break was the run's end rather than a change
// of step: every run ends off its step (its last operations free, copy
// results back, synchronise), which breaks the period it held. A break the
// stream never locked again after, with less than a step's operations
// after it, is that end: telling a user their step broke for it is false.
bool AccessLog::broke_at_end(const StreamLog& log) {
  if (log.breaks.load(std::memory_order_relaxed) == 0 || log.locked.load(std::memory_order_relaxed)) return false;
  const std::uint64_t after = log.operations.load(std::memory_order_relaxed) -
                              log.operations_at_break.load(std::memory_order_relaxed);
  return after < log.locked_period.load(std::memory_order_relaxed);
}

void AccessLog::drop_iteration(StreamLog& log) {
  if (log.recording && log.keeping) {
    log.dropped.fetch_add(1, std::memory_order_relaxed);
    release_marks(log.current);
  }
  log.recording = false;
  log.tentative = false;
}

StreamPosition AccessLog::follow_otherwise(FollowedStream& followed, IterationDetector::Event event,
                                           const vmm::AccessRecord& record) noexcept {
  StreamLog& log = static_cast<StreamLog&>(followed);
  // (What changes here is a boundary of the counts in recent_iterations.)
  const std::uint64_t ended_before = log.ended.load(std::memory_order_relaxed);
  const bool recording_before = log.recording;
  switch (event) {
    case IterationDetector::Event::broken:
      release_marks(record);
      drop_iteration(log);
      note_break(log);
      if (log.detector.untimed_kind_may_start() && marks_ != nullptr) start_tentative(log, record);  // (as below)
      break;
    case IterationDetector::Event::locked:
      note_lock(log);
      if (log.detector.phase() + 1 == log.detector.period()) {
        release_marks(record);
        start_iteration(log, record);
      } else if (log.tentative && log.current.ops.size() == log.detector.phase() &&
                 !log.detector.kinds().was_timed(log.kind)) {
        // Named a few operations into the step whose start the tentative
        // recording has (timed): it is the kind's first timed iteration.
        adopt_tentative(log, record);
      } else {
        // A kind named part-way (recognised at some phase, or taking over
        // from another) is recorded from its next iteration's start.
        release_marks(record);
        forget_iteration(log);
      }
      break;
    case IterationDetector::Event::none:
      if (log.recording && log.tentative && (log.detector.locked() || log.current.ops.size() > kTentativeOps)) {
        forget_iteration(log);  // (the step it began was none never timed)
      }
      if (log.recording) {
        if (log.keeping) {
          append(log, record);
        } else {
          if (record.started != nullptr) release_marks(record);  // (an untimed one has none)
          if (++log.counted == log.period) publish(log, record);
        }
      } else {
        release_marks(record);
        // Locked, but this iteration was not recorded (too large, or
        // dropped): the next one is, from its start.
        if (log.detector.locked() && log.detector.phase() + 1 == log.detector.period()) start_iteration(log, record);
        // Unlocked, and this operation ends a kind never timed: the next may
        // start it. Named only a few operations in, its first ones would be
        // gone untimed; so they are timed and kept on the chance.
        if (log.detector.untimed_kind_may_start() && marks_ != nullptr) start_tentative(log, record);
      }
      break;
  }
  StreamPosition at = position_of(log);
  at.boundary = event == IterationDetector::Event::locked || log.recording != recording_before ||
                log.ended.load(std::memory_order_relaxed) != ended_before;
  return at;
}

// The operation joins the iteration being recorded, written in place (a
// RecordedOp built aside and copied in costs a store-forwarding stall).
static_assert(sizeof(RecordedOp) == 96, "RecordedOp(record, first) sets every member: add a new one there");
void AccessLog::append(StreamLog& log, const vmm::AccessRecord& record) {
  RecordedIteration& it = log.current;
  if (it.units.size() + record.count > options_.max_units_per_iteration) {
    log.dropped.fetch_add(1, std::memory_order_relaxed);
    log.recording = false;
    release_marks(record);
    release_marks(it);
    return;
  }
  it.ops.emplace_back(record, static_cast<std::uint32_t>(it.units.size()));
  it.units.insert(it.units.end(), record.units, record.units + record.count);
  if (log.not_kernel_at.size() == log.period) log.not_kernel_at[it.ops.size() - 1] = record.function == nullptr;
  if (it.ops.size() == log.period) {
    publish(log, record);
    return;
  }
  // The next operation's places, asked for now: the buffers are a step
  // long, and the driver's work between two launches evicts them, so each
  // first write to a line was a cache miss on the launch path.
  if (it.ops.size() < it.ops.capacity()) {
    const RecordedOp* next = it.ops.data() + it.ops.size();
    __builtin_prefetch(next, 1);
    __builtin_prefetch(reinterpret_cast<const char*>(next + 1) - 1, 1);
  }
  if (it.units.size() < it.units.capacity()) __builtin_prefetch(it.units.data() + it.units.size(), 1);
}

void AccessLog::forget_iteration(StreamLog& log) {
  if (log.recording && log.keeping) release_marks(log.current);
  log.recording = false;
  log.tentative = false;
}

void AccessLog::start_tentative(StreamLog& log, const vmm::AccessRecord& last) {
  release_marks(log.current);
  log.recording = true;
  log.tentative = true;
  log.period = std::numeric_limits<std::size_t>::max();  // no end: it becomes a kind's, or is forgotten
  log.not_kernel_at.clear();
  log.ops_known = false;
  log.current.ops.clear();
  log.current.units.clear();
  log.timing = log.keeping = true;
  log.counted = 0;
  log.current.timed = true;
  log.current.log = &log;
  log.current.lock = 0;
  mark_before_first(log.current, last);
}

void AccessLog::adopt_tentative(StreamLog& log, const vmm::AccessRecord& record) {
  log.tentative = false;
  log.period = log.detector.period();
  log.not_kernel_at.assign(log.period, true);
  for (std::size_t i = 0; i < log.current.ops.size(); ++i) log.not_kernel_at[i] = log.current.ops[i].function == nullptr;
  log.current.lock = log.kind;
  log.since_timed = 0;
  append(log, record);
}

void AccessLog::start_iteration(StreamLog& log, const vmm::AccessRecord& last) {
  release_marks(log.current);
  log.recording = true;
  log.tentative = false;
  log.period = log.detector.period();
  log.not_kernel_at.assign(log.period, true);  // a new period, not yet seen whole: every kernel marked
  log.ops_known = false;
  log.current.ops.clear();
  log.current.units.clear();
  log.timing = marks_ != nullptr && ++log.since_timed > options_.timing_every;
  if (log.timing) log.since_timed = 0;
  log.keeping = log.timing || options_.record_untimed;
  log.counted = 0;
  log.current.timed = log.timing;
  log.current.log = &log;
  log.current.lock = log.kind;
  mark_before_first(log.current, last);
}

void AccessLog::mark_before_first(RecordedIteration& iteration, const vmm::AccessRecord& last) {
  if (marks_ == nullptr || !iteration.timed) return;
  iteration.before_first = {marks_->mark(last.stream), last.device, last.stream_bit};
}

bool AccessLog::wants_timing(std::uint64_t stream_bit) noexcept {
  StreamLog* log = find_log(stream_bit);
  if (log == nullptr || log->held.exchange(true, std::memory_order_acquire)) return false;
  const bool timing = log->recording && log->timing;
  log->held.store(false, std::memory_order_release);
  return timing;
}

bool AccessLog::marks_kernel_too(std::uint64_t stream_bit) noexcept {
  StreamLog* log = find_log(stream_bit);
  // (Held by another thread: marked, which times it either way.)
  if (log == nullptr || log->held.exchange(true, std::memory_order_acquire)) return true;
  bool marks = false;
  if (log->recording && log->timing && log->period != 0) {
    const std::size_t at = log->current.ops.size();  // the phase of the kernel about to be launched
    // Not yet seen whole (the first timed step of a lock, which the first
    // plan is made from: its read then waits for no span), first, after a
    // copy, or before one.
    marks = !log->ops_known || at == 0 || log->current.ops[at - 1].function == nullptr ||
            log->not_kernel_at[(at + 1) % log->period];
  }
  log->held.store(false, std::memory_order_release);
  return marks;
}

// What the consumer counted of the stream's operations up to a lock or the
// end of a whole iteration: the ring of recent iterations gets the last,
// with every operation since the one before it (those between kinds too,
// which ran on demand: the ring's shares are of the whole stream). A lock
// that made a new kind starts the ring afresh; one that came back to a
// known kind continues it.
void AccessLog::note_boundary(FollowedStream& followed) noexcept {
  StreamLog& log = static_cast<StreamLog&>(followed);
  const std::uint64_t followed_now = log.counts.followed.load(std::memory_order_relaxed);
  const std::uint64_t strayed_now = log.counts.strayed.load(std::memory_order_relaxed);
  const std::uint64_t operations_now = log.operations.load(std::memory_order_relaxed);
  const std::uint64_t serial = log.ended.load(std::memory_order_relaxed);
  const std::uint64_t new_kinds = log.new_kinds.load(std::memory_order_relaxed);
  const bool restart = new_kinds != log.noted_new_kinds;  // its iterations start afresh
  const bool ended = serial != log.noted_serial;          // else a lock, or a recording begun
  if (!restart && !ended) return;
  const vmm::HostPathCounts paged_now = marks_ != nullptr ? marks_->host_path_counts() : vmm::HostPathCounts{};
  if (restart) {
    log.recent.restart();
  } else {
    const vmm::HostPathCounts& was = log.paged_at_boundary;
    log.recent.note(serial, operations_now - log.operations_at_boundary, followed_now - log.followed_at_boundary,
                    strayed_now - log.strayed_at_boundary,
                    {paged_now.program_paging_ns - was.program_paging_ns,
                     paged_now.program_vmm_calls - was.program_vmm_calls, paged_now.moved_bytes - was.moved_bytes,
                     paged_now.fetches_on_demand - was.fetches_on_demand,
                     paged_now.fetches_planned - was.fetches_planned,
                     // (Threads' simulated clocks differ: an iteration ended on a thread behind
                     // the one that began it is not timed, rather than timed negative.)
                     paged_now.clock_ns > was.clock_ns ? paged_now.clock_ns - was.clock_ns : 0});
  }
  log.paged_at_boundary = paged_now;
  log.noted_new_kinds = new_kinds;
  log.noted_serial = serial;
  log.followed_at_boundary = followed_now;
  log.strayed_at_boundary = strayed_now;
  log.operations_at_boundary = operations_now;
}

std::uint64_t AccessLog::followed() const {
  std::lock_guard lock(logs_mutex_);
  std::uint64_t sum = 0;
  for (const auto& log : logs_) sum += log->counts.followed.load(std::memory_order_relaxed);
  return sum;
}

std::uint64_t AccessLog::strayed() const {
  std::lock_guard lock(logs_mutex_);
  std::uint64_t sum = 0;
  for (const auto& log : logs_) sum += log->counts.strayed.load(std::memory_order_relaxed);
  return sum;
}

void AccessLog::release_marks(const vmm::AccessRecord& record) {
  if (marks_ == nullptr || record.started == nullptr) return;
  marks_->release_mark(record.device, record.started);
  marks_->release_mark(record.device, record.ended);
}

void AccessLog::release_marks(RecordedIteration& iteration, std::size_t from) {
  if (marks_ == nullptr) return;
  if (from == 0 && iteration.before_first.event != nullptr) {
    marks_->release_mark(iteration.before_first.device, iteration.before_first.event);
    iteration.before_first.event = nullptr;
  }
  for (std::size_t i = from; i < iteration.ops.size(); ++i) {
    RecordedOp& op = iteration.ops[i];
    if (op.started != nullptr) marks_->release_mark(op.device, op.started);
    if (op.ended != nullptr) marks_->release_mark(op.device, op.ended);
    op.started = op.ended = nullptr;
  }
}

// A whole iteration goes out; the next is recorded into the buffers of the
// one before it, unless a reader still holds that.
void AccessLog::publish(StreamLog& log, const vmm::AccessRecord& last) {
  RecordedIteration& it = log.current;
  log.iterations.store(log.detector.iterations(), std::memory_order_relaxed);
  // Every whole iteration has its serial, kept or not, so that
  // request_timing() counts iterations, not recordings.
  it.serial = log.ended.fetch_add(1, std::memory_order_relaxed) + 1;
  bool recycled_timed = false;  // the buffers `it` gets back carry marks
  std::shared_ptr<RecordedIteration> let_go;  // one a reader has let go of, not reused: its marks go back
  if (it.timed && log.keeping) log.detector.kind_timed(it.lock);
  if (log.keeping) {
    log.ops_known = log.not_kernel_at.size() == log.period;  // every phase written down
    std::lock_guard lock(log.published_mutex);
    // A timed iteration nobody has read yet stays published over the
    // untimed ones after it: a planner busy or off the CPU for a step would
    // otherwise lose it, and wait timing_every iterations for the next.
    const bool hold = !it.timed && log.last != nullptr && log.last->timed && !log.last_read;
    if (!hold) {
      log.published.fetch_add(1, std::memory_order_relaxed);
      log.last_read = false;
      std::shared_ptr<RecordedIteration> next = std::move(log.spare);
      if (next != nullptr && next.use_count() != 1) log.held_by_readers.push_back(std::move(next));
      for (auto held = log.held_by_readers.begin(); held != log.held_by_readers.end(); ++held) {
        if (held->use_count() != 1) continue;
        (next == nullptr ? next : let_go) = std::move(*held);
        log.held_by_readers.erase(held);
        break;  // one a publish: readers let go of one at a time
      }
      if (next == nullptr) next = std::make_shared<RecordedIteration>();
      recycled_timed = next->timed;
      next->ops.swap(it.ops);
      next->units.swap(it.units);
      // (The recycled one's mark goes to `it`, released below with its others.)
      std::swap(next->before_first, it.before_first);
      next->serial = it.serial;
      next->timed = it.timed;
      next->log = it.log;
      next->lock = it.lock;
      log.spare = std::const_pointer_cast<RecordedIteration>(std::exchange(log.last, std::move(next)));
    }
  }
  // The recycled iteration's marks (no reader holds it any more); most
  // iterations are untimed, and then there is nothing to walk.
  if (recycled_timed) release_marks(it);
  if (let_go != nullptr && let_go->timed) release_marks(*let_go);
  it.ops.clear();
  it.units.clear();
  // The iteration now starting has the next serial: timed if it is due or
  // was asked for, and kept if timed or if untimed ones are recorded too.
  std::uint64_t requested = log.timed_from.load(std::memory_order_relaxed);
  const bool wanted = requested != 0 && it.serial + 1 >= requested;
  it.timed = log.timing = marks_ != nullptr && (++log.since_timed > options_.timing_every || wanted);
  if (log.timing) log.since_timed = 0;
  log.keeping = log.timing || options_.record_untimed;
  log.counted = 0;
  if (log.timing && wanted) log.timed_from.compare_exchange_strong(requested, 0, std::memory_order_relaxed);
  mark_before_first(it, last);
}

std::uint64_t AccessLog::request_timing(const void* log, std::uint64_t skip) {
  std::lock_guard lock(logs_mutex_);
  for (const auto& candidate : logs_) {
    if (candidate.get() != log) continue;
    const std::uint64_t serial = candidate->ended.load(std::memory_order_relaxed) + 2 + skip;
    candidate->timed_from.store(serial, std::memory_order_relaxed);
    return serial;
  }
  return 0;
}

AccessLog::StreamLog* AccessLog::busiest() const {
  StreamLog* best = nullptr;
  for (const auto& log : logs_) {
    const std::uint64_t published = log->ended.load(std::memory_order_relaxed);
    const std::uint64_t best_published = best != nullptr ? best->ended.load(std::memory_order_relaxed) : 0;
    if (best == nullptr || published > best_published ||
        (published == best_published && log->operations.load(std::memory_order_relaxed) >
                                            best->operations.load(std::memory_order_relaxed))) {
      best = log.get();
    }
  }
  return best;
}

std::shared_ptr<const RecordedIteration> AccessLog::last_iteration() const {
  std::lock_guard lock(logs_mutex_);
  StreamLog* log = busiest();
  if (log == nullptr) return nullptr;
  std::lock_guard published(log->published_mutex);
  log->last_read = true;
  return log->last;
}

nlohmann::json AccessLog::summary() const {
  std::lock_guard lock(logs_mutex_);
  std::uint64_t operations = 0, handoffs = 0, locks = 0, breaks = 0, unseen = 0, followed = 0, recorded = 0,
                dropped = 0, breaks_at_end = 0, kinds = 0, returns = 0, kinds_kept = 0;
  for (const auto& log : logs_) {
    operations += log->operations.load(std::memory_order_relaxed);
    handoffs += log->handoffs.load(std::memory_order_relaxed);
    followed += log->ended.load(std::memory_order_relaxed);
    locks += log->locks.load(std::memory_order_relaxed);
    breaks += log->breaks.load(std::memory_order_relaxed);
    if (broke_at_end(*log)) ++breaks_at_end;
    unseen += log->missed.load(std::memory_order_relaxed);
    recorded += log->published.load(std::memory_order_relaxed);
    dropped += log->dropped.load(std::memory_order_relaxed);
    kinds += log->new_kinds.load(std::memory_order_relaxed);
    returns += log->returns.load(std::memory_order_relaxed);
    kinds_kept += log->kinds_known.load(std::memory_order_relaxed);
  }
  StreamLog* main = busiest();
  nlohmann::json recent = main != nullptr ? main->recent.read() : nlohmann::json::array();
  return {{"streams", logs_.size() - thread_logs_},
          {"unnamed_threads", thread_logs_},
          {"operations", operations},
          {"handoffs", handoffs},
          {"period", main != nullptr ? main->locked_period.load(std::memory_order_relaxed) : 0},
          {"iterations", main != nullptr ? main->iterations.load(std::memory_order_relaxed) : 0},
          {"locked", main != nullptr && main->locked.load(std::memory_order_relaxed)},
          {"iterations_followed", followed},
          {"iterations_recorded", recorded},
          {"locks", locks},
          {"breaks", breaks - breaks_at_end},
          {"breaks_at_end", breaks_at_end},
          {"unseen_operations", unseen},
          {"dropped_iterations", dropped},
          {"kinds", kinds},
          {"kind_returns", returns},
          {"kinds_kept", kinds_kept},
          {"recent_iterations", std::move(recent)}};
}

}  // namespace vgpumem::scheduler
