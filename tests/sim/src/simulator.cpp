#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "sim.h"

namespace vgpusim {

Simulator& Simulator::get() {
  // Leaked on purpose: entry points may be called during exit.
  static Simulator* simulator = new Simulator();
  return *simulator;
}

void Simulator::count(const char* api) {
  std::lock_guard lock(calls_mutex);
  // Looked up by name first: a name longer than std::string's inline room
  // (cuLaunchKernel_ptsz) would otherwise allocate on every call.
  const auto known = stats.calls.find(std::string_view(api));
  if (known != stats.calls.end()) ++known->second;
  else stats.calls.emplace(api, 1);
}

bool Simulator::inject_fault(const std::string& operation) {
  auto it = faults.find(operation);
  if (it == faults.end()) return false;
  FaultRule& rule = it->second;
  ++rule.seen;
  const bool fail = rule.seen == rule.nth || (rule.and_later && rule.seen > rule.nth);
  if (fail) stats.faults_injected.push_back(operation + "#" + std::to_string(rule.seen));
  return fail;
}

bool Simulator::charge(int device, std::uint64_t bytes, bool mapped) {
  Device& d = devices.at(static_cast<std::size_t>(device));
  if (bytes > d.memory_bytes - d.physical_now) return false;
  d.physical_now += bytes;
  if (d.physical_now > d.physical_peak) d.physical_peak = d.physical_now;
  if (mapped) d.mapped_now += bytes;
  if (timeline.enabled) record_memory(*this, device);
  return true;
}

void Simulator::refund(int device, std::uint64_t bytes, bool mapped) {
  Device& d = devices.at(static_cast<std::size_t>(device));
  d.physical_now -= bytes;
  if (mapped) d.mapped_now -= bytes;
  if (timeline.enabled) record_memory(*this, device);
}

void Simulator::mapping_changed(int device, std::uint64_t bytes, bool added) {
  Device& d = devices.at(static_cast<std::size_t>(device));
  d.mapped_now = added ? d.mapped_now + bytes : d.mapped_now - bytes;
  if (timeline.enabled) record_memory(*this, device);
}

Region* Simulator::region_of(std::uint64_t address, std::uint64_t size) {
  auto it = regions.upper_bound(address);
  if (it == regions.begin()) return nullptr;
  --it;
  Region& r = it->second;
  if (address < r.base || address + size > r.base + r.size) return nullptr;
  return &r;
}

bool Simulator::accessible(std::uint64_t address, std::uint64_t size, bool include_freed) {
  Region* r = region_of(address, size);
  if (r == nullptr || (r->freed && !include_freed)) return false;
  if (r->kind != Region::Kind::reservation) return true;
  std::uint64_t at = address;
  const std::uint64_t end = address + size;
  while (at < end) {
    auto it = r->mappings.upper_bound(at - r->base);
    if (it == r->mappings.begin()) return false;
    --it;
    const std::uint64_t start = r->base + it->first;
    if (at < start || at >= start + it->second.size || !it->second.accessible) return false;
    at = start + it->second.size;
  }
  return true;
}

void Simulator::write_report(const char* path) {
  std::ostringstream out;
  out << "{\"devices\":[";
  for (std::size_t i = 0; i < devices.size(); ++i) {
    out << (i ? "," : "") << "{\"index\":" << i << ",\"memory_bytes\":" << devices[i].memory_bytes
        << ",\"physical_bytes_peak\":" << devices[i].physical_peak << ",\"physical_bytes_now\":" << devices[i].physical_now
        << "}";
  }
  out << "],\"illegal_accesses\":" << stats.illegal << ",\"illegal_access_events\":[";
  for (std::size_t i = 0; i < stats.illegal_events.size(); ++i) out << (i ? "," : "") << stats.illegal_events[i];
  out << "],\"simulated_time_ns\":" << static_cast<std::uint64_t>(std::max(latest_host_ns, last_end_ns))
      << ",\"engine_busy_ns\":{";
  const char* engine_names[] = {"none", "compute", "copy_h2d", "copy_d2h"};
  for (int e = 1; e < static_cast<int>(Engine::count); ++e) {
    double busy = 0;
    for (const Device& d : devices) busy += d.engine_busy_ns[e];
    out << (e > 1 ? "," : "") << "\"" << engine_names[e] << "\":" << static_cast<std::uint64_t>(busy);
  }
  out << "},\"operations_pending\":" << pending.size() << ",\"operations_executed\":" << stats.operations_executed
      << ",\"kernels_launched\":" << stats.kernels << ",\"bytes_h2d\":" << stats.bytes_h2d
      << ",\"bytes_d2h\":" << stats.bytes_d2h << ",\"pinned_host_bytes_peak\":" << stats.pinned_peak
      << ",\"cost_model\":\"" << (cost_model == CostModel::idle ? "idle" : "calibrated")
      << "\",\"driver_lock_waited_ns\":" << static_cast<std::uint64_t>(driver_lock_waited_ns)
      << ",\"scrubbed_bytes\":" << scrubbed_bytes << ",\"calls\":{";
  bool first = true;
  std::lock_guard calls_lock(calls_mutex);
  for (const auto& [api, n] : stats.calls) {
    out << (first ? "" : ",") << "\"" << api << "\":" << n;
    first = false;
  }
  out << "},\"faults_injected\":[";
  for (std::size_t i = 0; i < stats.faults_injected.size(); ++i) {
    out << (i ? "," : "") << "\"" << stats.faults_injected[i] << "\"";
  }
  out << "]}\n";
  const std::string tmp = std::string(path) + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    const std::string text = out.str();
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    std::rename(tmp.c_str(), path);
  }
}

std::vector<CUcontext>& context_stack() {
  thread_local std::vector<CUcontext> stack;
  return stack;
}

CUcontext current_handle() { return context_stack().empty() ? nullptr : context_stack().back(); }

Context* current_context(Simulator& sim) {
  const CUcontext current = current_handle();
  if (current == nullptr) return nullptr;
  auto it = sim.contexts.find(current);
  return it == sim.contexts.end() ? nullptr : &it->second;
}

CUresult check_context(Simulator& sim, Context** out) {
  if (!sim.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  Context* context = current_context(sim);
  if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (context->sticky != CUDA_SUCCESS) return context->sticky;
  if (out) *out = context;
  return CUDA_SUCCESS;
}

std::uint64_t round_up(std::uint64_t value, std::uint64_t to) { return (value + to - 1) / to * to; }

std::uint64_t reserve_address_space(std::uint64_t size, std::uint64_t alignment) {
  alignment = std::max<std::uint64_t>(alignment, kGranularity);
  void* p = mmap(nullptr, size + alignment, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return 0;
  // The slack stays reserved (PROT_NONE): address space is never handed out twice.
  return round_up(reinterpret_cast<std::uint64_t>(p), alignment);
}

void protect_none(std::uint64_t address, std::uint64_t size) {
  mmap(reinterpret_cast<void*>(address), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

}  // namespace vgpusim
