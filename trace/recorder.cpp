#include "trace/recorder.h"

#include <fcntl.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "vgpumem_version.h"

namespace vgpumem::trace {

std::uint64_t now_ns() { return monotonic_ns(); }

namespace {

// ---------------------------------------------------------------------------
// Launches: per-thread, append-only, chunked. The owning thread is the only
// writer; to_json may read concurrently, so each chunk publishes its size and
// its successor with release stores that the reader acquires.

struct LaunchRecord {
  std::uint64_t timestamp_ns;
  const char* entry_point;
  const void* function;
  const void* stream;
};

constexpr std::size_t kChunkRecords = 4096;

struct Chunk {
  std::atomic<std::size_t> size{0};
  std::atomic<Chunk*> next{nullptr};
  LaunchRecord records[kChunkRecords];  // left uninitialised: only [0, size) is ever read
};

class ThreadBuffer {
 public:
  ThreadBuffer() : head_(new Chunk), tail_(head_) {}
  ~ThreadBuffer() {
    for (Chunk* chunk = head_; chunk != nullptr;) delete std::exchange(chunk, chunk->next.load());
  }
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;

  // Owner thread only.
  void count_launch() { launches_seen_.store(launches_seen_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
  std::uint64_t launches_seen() const { return launches_seen_.load(std::memory_order_relaxed); }

  // Owner thread only. Allocates only when the current chunk is full.
  void append(const LaunchRecord& record) {
    std::size_t size = tail_->size.load(std::memory_order_relaxed);
    if (size == kChunkRecords) {
      Chunk* fresh = new Chunk;
      tail_->next.store(fresh, std::memory_order_release);
      tail_ = fresh;
      size = 0;
    }
    tail_->records[size] = record;
    tail_->size.store(size + 1, std::memory_order_release);
  }

  // Any thread: visits every record published so far.
  template <class Visit>
  void for_each(Visit&& visit) const {
    for (const Chunk* chunk = head_; chunk != nullptr; chunk = chunk->next.load(std::memory_order_acquire)) {
      const std::size_t size = chunk->size.load(std::memory_order_acquire);
      for (std::size_t i = 0; i < size; ++i) visit(chunk->records[i]);
    }
  }

 private:
  std::atomic<std::uint64_t> launches_seen_{0};
  Chunk* const head_;
  Chunk* tail_;  // owner thread only
};

// ---------------------------------------------------------------------------
// Everything else: rare, kept under a mutex.

struct MemoryEvent {
  enum class Kind { alloc, free, oom, device_bytes, to_host, to_device, resident_bytes };
  Kind kind;
  std::uint64_t timestamp_ns;
  pid_t tid;
  int device;
  std::uint64_t address = 0;    // alloc, free
  std::uint64_t bytes = 0;      // alloc, free, oom (requested), device_bytes (counted)
  std::uint64_t in_use = 0;     // oom
  std::uint64_t cap = 0;        // oom, device_bytes
  std::string api;              // alloc, free, oom
};

using LookupKey = std::tuple<LookupPath, std::string, int, std::uint64_t>;

struct LookupStats {
  bool hooked = false;  // as the latest look-up answered
  std::uint64_t count = 0;
};

std::string_view to_string(LookupPath path) {
  switch (path) {
    case LookupPath::exported_symbol: return "exported_symbol";
    case LookupPath::dlsym: return "dlsym";
    case LookupPath::get_proc_address: return "cuGetProcAddress";
    case LookupPath::get_proc_address_v2: return "cuGetProcAddress_v2";
  }
  return "unknown";
}

std::string hex(std::uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%" PRIx64, value);
  return text;
}

std::string hex(const void* pointer) { return hex(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(pointer))); }

pid_t current_tid() { return ::gettid(); }

std::uint64_t next_recorder_id() {
  static std::atomic<std::uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace

// ---------------------------------------------------------------------------

struct Recorder::Impl {
  Impl(std::uint64_t max, const Impl* before_fork) : max_events(max), abandoned_at_fork(before_fork) {}

  // Never reused, so a thread's cached buffer of a destroyed or reset recorder
  // can never be mistaken for one of a live recorder.
  const std::uint64_t id = next_recorder_id();
  const std::uint64_t max_events;
  const std::uint64_t start_ns = now_ns();
  // The parent's state, kept reachable so leak checkers do not report it.
  const Impl* const abandoned_at_fork;
  std::atomic<std::uint64_t> events_reserved{0};
  std::atomic<std::uint64_t> events_dropped{0};

  mutable std::mutex threads_mutex;
  std::map<pid_t, std::unique_ptr<ThreadBuffer>> threads;  // by thread id; guarded by threads_mutex

  mutable std::mutex events_mutex;  // guards everything below
  std::vector<MemoryEvent> events;
  std::map<int, std::uint64_t> peak_counted_bytes;
  std::uint64_t ooms = 0;
  std::map<LookupKey, LookupStats> lookups;

  // Takes one of the max_events slots, or counts the event as dropped.
  bool reserve_event() {
    if (events_reserved.fetch_add(1, std::memory_order_relaxed) < max_events) return true;
    events_dropped.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  ThreadBuffer& buffer_for_this_thread();
  ThreadBuffer& register_this_thread();
  void add_event(MemoryEvent event);
  double microseconds_since_start(std::uint64_t timestamp_ns) const {
    return static_cast<double>(static_cast<std::int64_t>(timestamp_ns - start_ns)) / 1000.0;
  }
  nlohmann::json launch_events(std::uint64_t& launches, nlohmann::json& by_entry_point) const;
  nlohmann::json memory_events(nlohmann::json& summary) const;
};

namespace {

// A thread's buffers for the last few recorders it used. A miss is correct,
// only slower: the recorder finds the thread's existing buffer by thread id.
struct CachedBuffer {
  std::uint64_t recorder_id = 0;  // 0: empty (ids start at 1)
  ThreadBuffer* buffer = nullptr;
};
constexpr std::size_t kCachedRecorders = 4;
thread_local CachedBuffer t_cached[kCachedRecorders];
thread_local std::size_t t_next_replaced = 0;

}  // namespace

ThreadBuffer& Recorder::Impl::buffer_for_this_thread() {
  for (const CachedBuffer& cached : t_cached) {
    if (cached.recorder_id == id) return *cached.buffer;
  }
  ThreadBuffer& buffer = register_this_thread();
  t_cached[t_next_replaced] = CachedBuffer{id, &buffer};
  t_next_replaced = (t_next_replaced + 1) % kCachedRecorders;
  return buffer;
}

ThreadBuffer& Recorder::Impl::register_this_thread() {
  const pid_t tid = current_tid();
  std::lock_guard lock(threads_mutex);
  std::unique_ptr<ThreadBuffer>& buffer = threads[tid];
  // A thread id the kernel reused after its first owner exited shares that
  // buffer: records carry the same tid, and the old owner appends no more.
  if (!buffer) buffer = std::make_unique<ThreadBuffer>();
  return *buffer;
}

void Recorder::Impl::add_event(MemoryEvent event) {
  if (!reserve_event()) return;
  std::lock_guard lock(events_mutex);
  events.push_back(std::move(event));
}

nlohmann::json Recorder::Impl::launch_events(std::uint64_t& launches, nlohmann::json& by_entry_point) const {
  nlohmann::json out = nlohmann::json::array();
  std::map<std::string_view, std::uint64_t> counts;
  const pid_t pid = ::getpid();
  std::lock_guard lock(threads_mutex);
  for (const auto& [tid, buffer] : threads) {
    launches += buffer->launches_seen();
    buffer->for_each([&, thread = tid](const LaunchRecord& record) {
      ++counts[record.entry_point];
      out.push_back({{"name", record.entry_point},
                     {"cat", "launch"},
                     {"ph", "i"},
                     {"s", "t"},
                     {"ts", microseconds_since_start(record.timestamp_ns)},
                     {"pid", pid},
                     {"tid", thread},
                     {"args", {{"function", hex(record.function)}, {"stream", hex(record.stream)}}}});
    });
  }
  for (const auto& [name, count] : counts) by_entry_point[std::string(name)] = count;
  return out;
}

nlohmann::json Recorder::Impl::memory_events(nlohmann::json& summary) const {
  nlohmann::json out = nlohmann::json::array();
  std::lock_guard lock(events_mutex);
  for (const MemoryEvent& event : events) {
    nlohmann::json json = {{"ts", microseconds_since_start(event.timestamp_ns)}, {"pid", ::getpid()}, {"tid", event.tid}};
    switch (event.kind) {
      case MemoryEvent::Kind::alloc:
      case MemoryEvent::Kind::free:
        json.update({{"name", event.kind == MemoryEvent::Kind::alloc ? "alloc" : "free"},
                     {"cat", "memory"},
                     {"ph", "i"},
                     {"s", "t"},
                     {"args", {{"address", hex(event.address)}, {"bytes", event.bytes}, {"api", event.api}, {"device", event.device}}}});
        break;
      case MemoryEvent::Kind::oom:
        json.update({{"name", "out of memory"},
                     {"cat", "oom"},
                     {"ph", "i"},
                     {"s", "p"},
                     {"args",
                      {{"requested", event.bytes}, {"in_use", event.in_use}, {"cap", event.cap}, {"api", event.api}, {"device", event.device}}}});
        break;
      case MemoryEvent::Kind::device_bytes:
        json.update({{"name", "device " + std::to_string(event.device) + " memory"},
                     {"cat", "memory"},
                     {"ph", "C"},
                     {"args", {{"counted", event.bytes}, {"cap", event.cap}}}});
        break;
      case MemoryEvent::Kind::to_host:
      case MemoryEvent::Kind::to_device:
        json.update({{"name", "on host"},
                     {"cat", "residency"},
                     {"ph", event.kind == MemoryEvent::Kind::to_host ? "b" : "e"},
                     {"id", hex(event.address)},
                     {"args", {{"bytes", event.bytes}, {"device", event.device}}}});
        break;
      case MemoryEvent::Kind::resident_bytes:
        json.update({{"name", "device " + std::to_string(event.device) + " resident"},
                     {"cat", "residency"},
                     {"ph", "C"},
                     {"args", {{"resident", event.bytes}, {"cap", event.cap}}}});
        break;
    }
    out.push_back(std::move(json));
  }

  nlohmann::json peaks = nlohmann::json::object();
  for (const auto& [device, peak] : peak_counted_bytes) peaks[std::to_string(device)] = peak;
  summary["peak_counted_bytes"] = std::move(peaks);
  summary["ooms_returned"] = ooms;

  nlohmann::json lookup_list = nlohmann::json::array();
  for (const auto& [key, stats] : lookups) {
    const auto& [path, name, version, flags] = key;
    lookup_list.push_back({{"path", to_string(path)},
                           {"name", name},
                           {"version", version},
                           {"flags", flags},
                           {"hooked", stats.hooked},
                           {"count", stats.count}});
  }
  summary["lookups"] = std::move(lookup_list);
  return out;
}

// ---------------------------------------------------------------------------

Recorder::Recorder(std::uint64_t max_events) : impl_(new Impl(max_events, nullptr)) {}

Recorder::~Recorder() { delete impl_; }

void Recorder::record_launch(const char* entry_point, const void* function, const void* stream) {
  ThreadBuffer& buffer = impl_->buffer_for_this_thread();
  buffer.count_launch();
  if (!impl_->reserve_event()) return;
  buffer.append(LaunchRecord{now_ns(), entry_point, function, stream});
}

void Recorder::record_alloc(int device, std::uint64_t address, std::uint64_t bytes, const char* api) {
  impl_->add_event({MemoryEvent::Kind::alloc, now_ns(), current_tid(), device, address, bytes, 0, 0, api ? api : ""});
}

void Recorder::record_free(int device, std::uint64_t address, std::uint64_t bytes, const char* api) {
  impl_->add_event({MemoryEvent::Kind::free, now_ns(), current_tid(), device, address, bytes, 0, 0, api ? api : ""});
}

void Recorder::record_oom(int device, std::uint64_t requested, std::uint64_t in_use, std::uint64_t cap, const char* api) {
  {
    // Counted even when the event itself is dropped: the summary stays exact.
    std::lock_guard lock(impl_->events_mutex);
    ++impl_->ooms;
  }
  impl_->add_event({MemoryEvent::Kind::oom, now_ns(), current_tid(), device, 0, requested, in_use, cap, api ? api : ""});
}

void Recorder::record_device_bytes(int device, std::uint64_t bytes, std::uint64_t cap) {
  {
    std::lock_guard lock(impl_->events_mutex);
    std::uint64_t& peak = impl_->peak_counted_bytes[device];
    peak = std::max(peak, bytes);
  }
  impl_->add_event({MemoryEvent::Kind::device_bytes, now_ns(), current_tid(), device, 0, bytes, 0, cap, {}});
}

void Recorder::record_residency(int device, std::uint64_t address, std::uint64_t bytes, bool to_host) {
  impl_->add_event({to_host ? MemoryEvent::Kind::to_host : MemoryEvent::Kind::to_device, now_ns(), current_tid(), device,
                    address, bytes, 0, 0, {}});
}

void Recorder::record_resident_bytes(int device, std::uint64_t bytes, std::uint64_t cap) {
  impl_->add_event({MemoryEvent::Kind::resident_bytes, now_ns(), current_tid(), device, 0, bytes, 0, cap, {}});
}

void Recorder::record_lookup(LookupPath path, std::string_view name, int version, std::uint64_t flags, bool hooked) {
  std::lock_guard lock(impl_->events_mutex);
  LookupStats& stats = impl_->lookups[LookupKey{path, std::string(name), version, flags}];
  stats.hooked = hooked;
  ++stats.count;
}

nlohmann::json Recorder::to_json(const nlohmann::json& summary_extra) const {
  nlohmann::json summary = {{"version", 1}, {"vgpumem_version", kVersion}};
  std::uint64_t launches = 0;
  nlohmann::json by_entry_point = nlohmann::json::object();

  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", ::getpid()}, {"tid", 0}, {"args", {{"name", "vgpumem"}}}});
  for (nlohmann::json& event : impl_->launch_events(launches, by_entry_point)) events.push_back(std::move(event));
  for (nlohmann::json& event : impl_->memory_events(summary)) events.push_back(std::move(event));

  summary["launches"] = launches;
  summary["launches_by_entry_point"] = std::move(by_entry_point);
  summary["events_dropped"] = impl_->events_dropped.load(std::memory_order_relaxed);
  if (summary_extra.is_object()) {
    for (const auto& [key, value] : summary_extra.items()) summary[key] = value;
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}, {"vgpumem", std::move(summary)}};
}

namespace {

bool write_all(int fd, const std::string& text) {
  const char* data = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t written = ::write(fd, data, left);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    data += written;
    left -= static_cast<std::size_t>(written);
  }
  return true;
}

// Writes `text` to a temporary file beside `path`, then renames it over
// `path`: a reader never sees half a trace. Returns the failing step or empty.
std::string replace_file(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create " + temporary + ": " + std::strerror(errno);
  const bool written = write_all(fd, text);
  const int write_errno = errno;
  if (::close(fd) != 0 || !written) {
    const int failure = written ? errno : write_errno;
    ::unlink(temporary.c_str());
    return "cannot write " + temporary + ": " + std::strerror(failure);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int failure = errno;
    ::unlink(temporary.c_str());
    return "cannot rename " + temporary + " to " + path + ": " + std::strerror(failure);
  }
  return {};
}

}  // namespace

bool Recorder::write(const std::string& path, const nlohmann::json& summary_extra, std::string* error) const {
  std::string failure;
  try {
    // Names come from the program (look-ups by arbitrary strings): never let
    // invalid UTF-8 abort the dump.
    const std::string text = to_json(summary_extra).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    failure = replace_file(path, text);
  } catch (const std::exception& exception) {
    failure = std::string("cannot build the trace: ") + exception.what();
  }
  if (!failure.empty() && error != nullptr) *error = "trace " + path + ": " + failure;
  return failure.empty();
}

void Recorder::reset_after_fork() {
  // Only the forking thread exists in the child; the mutexes may have been
  // held by threads that are gone, so they cannot be locked, nor destroyed.
  // Start over with a fresh state (and a fresh id, so every cached per-thread
  // buffer misses) and abandon the old one: its pages are the parent's,
  // copy-on-write, and cost nothing while untouched.
  impl_ = new Impl(impl_->max_events, impl_);
}

}  // namespace vgpumem::trace
