// Test control: park the next call of one operation until the test releases
// it (vgpusim.h). A parked call waits at its entry, before it takes the
// simulator's lock: the simulator stays usable by every other thread (and by
// a child forked meanwhile), while the caller -- and whatever lock it holds,
// such as a shim's own -- stays put.
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>

#include "sim.h"

namespace vgpusim {
namespace {

std::atomic<bool> g_armed{false};

// Never destroyed: a child forked while a call is parked would wait, at exit,
// in the condition variable's destructor for a waiter that does not exist in it.
struct Stall {
  std::mutex mutex;
  std::condition_variable changed;
  std::string operation;  // armed for this one
  bool parked = false;
  bool released = false;
};
Stall& stall() {
  static Stall* const state = new Stall;
  return *state;
}

}  // namespace

void stall_point(const char* operation) {
  if (!g_armed.load(std::memory_order_acquire)) return;
  Stall& s = stall();
  std::unique_lock lock(s.mutex);
  if (!g_armed.load(std::memory_order_relaxed) || s.operation != operation) return;
  g_armed.store(false, std::memory_order_relaxed);  // one call only
  s.parked = true;
  s.changed.notify_all();
  s.changed.wait(lock, [&] { return s.released; });
  s.parked = false;
}

}  // namespace vgpusim

using namespace vgpusim;

SIM_EXPORT CUresult vgpusimStallNext(const char* operation) {
  if (operation == nullptr || (std::strcmp(operation, "cuMemCreate") != 0 && std::strcmp(operation, "hostalloc") != 0)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Stall& s = stall();
  std::lock_guard lock(s.mutex);
  s.operation = operation;
  s.released = false;
  g_armed.store(true, std::memory_order_release);
  return CUDA_SUCCESS;
}

SIM_EXPORT int vgpusimStalled(void) {
  Stall& s = stall();
  std::lock_guard lock(s.mutex);
  return s.parked ? 1 : 0;
}

SIM_EXPORT void vgpusimReleaseStall(void) {
  Stall& s = stall();
  {
    std::lock_guard lock(s.mutex);
    s.released = true;
    g_armed.store(false, std::memory_order_relaxed);
  }
  s.changed.notify_all();
}
