#include "interpose/library_call.h"

#include <array>

#include "common/log.h"
#include "interpose/library_definitions.h"
#include "interpose/runtime_platform.h"
#include "vmm/pager.h"

namespace vgpumem::interpose {

namespace {
thread_local int t_calls = 0;  // library calls this thread is inside
std::array<std::atomic<std::uint64_t>, kLibraryHookCount> g_calls{};
}  // namespace

void count_library_call(std::size_t hook) noexcept {
  if (hook < g_calls.size()) g_calls[hook].fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t library_calls(std::size_t hook) noexcept {
  return hook < g_calls.size() ? g_calls[hook].load(std::memory_order_relaxed) : 0;
}

void* next_definition(const char* name, std::atomic<void*>& slot) {
  void* function = slot.load(std::memory_order_acquire);
  if (function == nullptr) {
    function = library_definition(name);
    if (function == nullptr) {
      VGPUMEM_LOG_ERROR("{} was called, but no library after libvgpumem.so defines it, and dlsym has not found it in "
                        "one loaded on its own (RTLD_LOCAL)",
                        name);
    }
    slot.store(function, std::memory_order_release);
  }
  return function;
}

LibraryCall::LibraryCall(LibraryOp op, const std::optional<ByteRange>& written, CUstream stream) {
  ++t_calls;
  if (t_calls > 1) return;
  vmm::Pager* pager = runtime().pager_if_created();
  if (pager == nullptr) return;
  scope_.op = op;
  scope_.stream = stream;
  if (written && pager->owns(written->address)) scope_.add(written->address, written->bytes);
  if (pager->begin_library_call(scope_)) pager_ = pager;
}

LibraryCall::~LibraryCall() {
  if (pager_ != nullptr) pager_->end_library_call(scope_, completed_);
  --t_calls;
}

bool LibraryCall::inside_one() { return t_calls > 0; }

bool LibraryCall::passes_through() {
  return vgpumem::passes_through() || !runtime().config().library_hooks;
}

}  // namespace vgpumem::interpose
