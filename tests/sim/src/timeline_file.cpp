// VGPUSIM_TIMELINE: what each device's engines did, how much memory was
// charged, and what each host thread paid for or waited for (the driver's
// work, its lock, the device), in simulated time, as a Chrome trace-event
// file (Perfetto, chrome://tracing, scripts/plot_timeline.py). The shim's
// own trace is in wall time and cannot show what a schedule costs on the
// simulated device; this file can, and two runs of one workload line up on
// its time axis.
//
// Entries are kept in memory (a fixed-size record each, bounded by
// VGPUSIM_TIMELINE_MAX_EVENTS, the rest counted) and formatted once, at exit,
// so recording costs a run little.
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "sim.h"

namespace vgpusim {
namespace {

// The lanes: one thread id per engine, named as the H100's engines are used.
const char* lane_name(Engine engine) {
  switch (engine) {
    case Engine::compute: return "compute";
    case Engine::copy_h2d: return "copy to device";
    case Engine::copy_d2h: return "copy to host";
    default: return "none";
  }
}

const char* span_name(HostSpan why) {
  switch (why) {
    case HostSpan::issue: return "issue";
    case HostSpan::driver_call: return "driver call";
    case HostSpan::driver_lock: return "driver lock";
    case HostSpan::device_wait: return "device wait";
    case HostSpan::poll: return "poll";
    case HostSpan::handoff: return "handoff";
  }
  return "?";
}

// The calling thread's lane and its last host span (extended while the next
// one follows it for the same reason: a run of launches is one span).
struct ThreadLane {
  int lane = -1;
  std::size_t last_span = 0;
  bool has_span = false;
};
thread_local ThreadLane t_lane;

void append_escaped(std::string& out, const char* text) {
  for (const char* c = text; *c; ++c) {
    const auto byte = static_cast<unsigned char>(*c);
    if (byte == '"' || byte == '\\') {
      out += '\\';
      out += *c;
    } else if (byte < 0x20) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", byte);
      out += code;
    } else {
      out += *c;
    }
  }
}

// Microseconds, as the format wants, to the nanosecond.
std::string micros(double ns) {
  char text[40];
  std::snprintf(text, sizeof text, "%.3f", ns / 1000.0);
  return text;
}

void add(Simulator& sim, const TimelineFile::Entry& entry) {
  TimelineFile& timeline = sim.timeline;
  if (timeline.entries.size() >= timeline.max_events) {
    ++timeline.dropped;
    return;
  }
  timeline.entries.push_back(entry);
}

std::string counter(int device, double at_ns, std::uint64_t physical, std::uint64_t mapped, std::uint64_t memory_bytes) {
  return "{\"ph\":\"C\",\"name\":\"device " + std::to_string(device) + " physical bytes\",\"pid\":" +
         std::to_string(device) + ",\"ts\":" + micros(at_ns) + ",\"args\":{\"physical\":" + std::to_string(physical) +
         ",\"mapped\":" + std::to_string(mapped) + ",\"device_memory\":" + std::to_string(memory_bytes) + "}}";
}

}  // namespace

int host_lane(Simulator& sim) {
  if (t_lane.lane < 0) {
    char name[64] = "";
    ::pthread_getname_np(::pthread_self(), name, sizeof name);
    t_lane.lane = static_cast<int>(sim.timeline.thread_names.size());
    sim.timeline.thread_names.emplace_back(name);
  }
  return t_lane.lane;
}

void record_host_span(Simulator& sim, double from_ns, double to_ns, HostSpan why, const char* label) {
  std::vector<TimelineFile::Entry>& entries = sim.timeline.entries;
  if (t_lane.has_span && t_lane.last_span < entries.size()) {
    TimelineFile::Entry& last = entries[t_lane.last_span];
    if (last.why == why && last.name == label && last.start_ns + last.duration_ns == from_ns) {
      last.duration_ns = to_ns - last.start_ns;
      return;
    }
  }
  TimelineFile::Entry entry;
  entry.kind = TimelineFile::Kind::host;
  entry.start_ns = from_ns;
  entry.duration_ns = to_ns - from_ns;
  entry.thread = host_lane(sim);
  entry.why = why;
  entry.name = label;
  const std::size_t at = entries.size();
  add(sim, entry);
  t_lane.has_span = entries.size() > at;
  t_lane.last_span = at;
}

void record_operation(Simulator& sim, int device, const Pending& work) {
  TimelineFile::Entry entry;
  entry.start_ns = work.start_ns;
  entry.duration_ns = work.end_ns - work.start_ns;
  entry.issued_ns = work.issued_ns;
  entry.bytes = work.operation.bytes;
  entry.what = work.operation.what;
  entry.name = work.operation.name;
  entry.device = device;
  entry.thread = work.issued_by;
  entry.engine = work.operation.engine;
  add(sim, entry);
}

void record_memory(Simulator& sim, int device) {
  TimelineFile::Entry entry;
  // Charges, refunds, maps and unmaps happen in API calls, on the calling thread's clock.
  entry.kind = TimelineFile::Kind::memory;
  entry.start_ns = host_now(sim);
  entry.bytes = sim.devices.at(static_cast<std::size_t>(device)).physical_now;
  entry.mapped = sim.devices.at(static_cast<std::size_t>(device)).mapped_now;
  entry.device = device;
  add(sim, entry);
}

void write_timeline(Simulator& sim, const char* path) {
  TimelineFile& timeline = sim.timeline;
  // In time order for readers that stream the file (operations are recorded
  // when they run, which is not the order they start in).
  std::stable_sort(timeline.entries.begin(), timeline.entries.end(),
                   [](const TimelineFile::Entry& a, const TimelineFile::Entry& b) { return a.start_ns < b.start_ns; });
  const double end_ns = std::max(sim.latest_host_ns, sim.last_end_ns);
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"vgpusim\",\"clock\":\"simulated\","
                    "\"max_events\":" + std::to_string(timeline.max_events) +
                    ",\"events_dropped\":" + std::to_string(timeline.dropped) +
                    ",\"simulated_time_ns\":" + std::to_string(static_cast<std::uint64_t>(end_ns)) +
                    "},\"traceEvents\":[\n";
  for (std::size_t d = 0; d < sim.devices.size(); ++d) {
    const std::string pid = std::to_string(d);
    out += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"args\":{\"name\":\"device " + pid + "\"}},\n";
    for (Engine engine : {Engine::compute, Engine::copy_h2d, Engine::copy_d2h}) {
      const std::string tid = std::to_string(static_cast<int>(engine));
      out += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" + tid + ",\"args\":{\"name\":\"" +
             lane_name(engine) + "\"}},\n";
      out += "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + pid + ",\"tid\":" + tid +
             ",\"args\":{\"sort_index\":" + tid + "}},\n";
    }
    // Every device starts empty: the counter starts at 0 so a plot's first step is right.
    out += counter(static_cast<int>(d), 0, 0, 0, sim.devices[d].memory_bytes) + ",\n";
  }
  // The host: one process after the devices, a lane per thread that issued
  // work or paid for a driver call, numbered as first seen, named as the
  // thread was named then.
  const std::string host_pid = std::to_string(sim.devices.size());
  if (!timeline.thread_names.empty()) {
    out += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + host_pid + ",\"args\":{\"name\":\"host\"}},\n";
  }
  for (std::size_t lane = 0; lane < timeline.thread_names.size(); ++lane) {
    const std::string tid = std::to_string(lane + 1);
    std::string name = "thread " + std::to_string(lane);
    if (!timeline.thread_names[lane].empty()) name += " (" + timeline.thread_names[lane] + ")";
    out += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + host_pid + ",\"tid\":" + tid + ",\"args\":{\"name\":\"";
    append_escaped(out, name.c_str());
    out += "\"}},\n";
  }
  for (const TimelineFile::Entry& e : timeline.entries) {
    if (e.kind == TimelineFile::Kind::host) {
      std::string span;
      append_escaped(span, e.name != nullptr ? e.name : span_name(e.why));
      out += "{\"ph\":\"X\",\"name\":\"" + span + "\",\"cat\":\"host\",\"pid\":" + host_pid +
             ",\"tid\":" + std::to_string(e.thread + 1) + ",\"ts\":" + micros(e.start_ns) + ",\"dur\":" +
             micros(e.duration_ns) + "},\n";
      continue;
    }
    const std::uint64_t memory_bytes = sim.devices.at(static_cast<std::size_t>(e.device)).memory_bytes;
    if (e.kind == TimelineFile::Kind::memory) {
      out += counter(e.device, e.start_ns, e.bytes, e.mapped, memory_bytes) + ",\n";
      continue;
    }
    std::string kind;
    append_escaped(kind, e.name != nullptr ? e.name : e.what);
    out += "{\"ph\":\"X\",\"name\":\"" + kind + "\",\"cat\":\"" + e.what + "\",\"pid\":" + std::to_string(e.device) +
           ",\"tid\":" + std::to_string(static_cast<int>(e.engine)) + ",\"ts\":" + micros(e.start_ns) +
           ",\"dur\":" + micros(e.duration_ns) + ",\"args\":{\"kind\":\"" + kind + "\"";
    if (e.bytes != 0) out += ",\"bytes\":" + std::to_string(e.bytes);
    out += ",\"issued\":" + micros(e.issued_ns);
    if (e.thread >= 0) out += ",\"thread\":" + std::to_string(e.thread);
    out += "}},\n";
  }
  // The last value again at the end of the run, so the counter spans it.
  for (std::size_t d = 0; d < sim.devices.size(); ++d) {
    out += counter(static_cast<int>(d), end_ns, sim.devices[d].physical_now, sim.devices[d].mapped_now,
                   sim.devices[d].memory_bytes);
    out += d + 1 < sim.devices.size() ? ",\n" : "\n";
  }
  out += "]}\n";
  const std::string tmp = std::string(path) + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fwrite(out.data(), 1, out.size(), f);
    std::fclose(f);
    std::rename(tmp.c_str(), path);
  }
}

}  // namespace vgpusim
