// Test builds only (VGPUMEM_FAULT_INJECTION): the shim's own operator new,
// which can be made to fail, so the e2e tests can prove that an allocation
// failure inside a hook becomes CUDA_ERROR_OUT_OF_MEMORY instead of an
// exception unwinding into the program's C frames.
//
//   VGPUMEMTEST_FAIL_ALLOCATIONS=<hook symbol>#<n>
//
// makes every allocation the shim makes fail with std::bad_alloc while the
// n-th call of that hook is the latest one (from its start until the next
// call of it begins). Named outside VGPUMEM_* so that the configuration,
// which refuses unknown VGPUMEM_ variables, never sees it.
//
// The shim carries its own copy of the C++ runtime (-static-libstdc++,
// hidden), so this replaces operator new for the shim's code only, never the
// program's. Sanitizer builds use the sanitizer's operator new and leave this
// file out.
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

#include "interpose/hook_table.h"

namespace vgpumem::interpose {
namespace {

// 0: not read yet, 1: off, 2: armed.
std::atomic<int> g_state{0};
std::atomic<HookId> g_hook{HookId::count_};
std::atomic<std::uint64_t> g_call{0};

void read_setting() {
  const char* value = std::getenv("VGPUMEMTEST_FAIL_ALLOCATIONS");
  const char* hash = value != nullptr ? std::strchr(value, '#') : nullptr;
  const HookEntry* entry =
      hash != nullptr ? find_hook_by_symbol(std::string_view(value, static_cast<std::size_t>(hash - value))) : nullptr;
  const std::uint64_t call = hash != nullptr ? std::strtoull(hash + 1, nullptr, 10) : 0;
  if (entry == nullptr || call == 0) {
    g_state.store(1, std::memory_order_release);
    return;
  }
  g_hook.store(static_cast<HookId>(entry - &hook_entry(HookId{})), std::memory_order_relaxed);
  g_call.store(call, std::memory_order_relaxed);
  g_state.store(2, std::memory_order_release);
}

bool allocation_fails() {
  int state = g_state.load(std::memory_order_acquire);
  if (state == 0) {
    read_setting();  // getenv and a table scan: allocates nothing
    state = g_state.load(std::memory_order_acquire);
  }
  if (state != 2) return false;
  return hook_calls(g_hook.load(std::memory_order_relaxed)) == g_call.load(std::memory_order_relaxed);
}

}  // namespace
}  // namespace vgpumem::interpose

void* operator new(std::size_t bytes) {
  if (vgpumem::interpose::allocation_fails()) throw std::bad_alloc();
  for (;;) {
    if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}
