// What the hooks of libraries (cuBLAS, cuBLASLt) share: finding the
// library's own definition of a function, and one call with what it
// overwrites whole as the pager's scope for its length
// (vmm/library_call_scope.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include <cuda.h>

#include "interpose/gemm_operands.h"
#include "interpose/library_hooks.h"
#include "common/library_op.h"
#include "vmm/library_call_scope.h"

namespace vgpumem::vmm {
class Pager;
}

namespace vgpumem::interpose {

// Exported from libvgpumem.so with the library's own name.
#define VGPUMEM_LIBRARY_HOOK extern "C" __attribute__((visibility("default")))

// The library's definition of `name` (library_definitions.h: the next in
// the search order, or the one our dlsym found in a library loaded
// RTLD_LOCAL), looked up into `slot` until found; null, logged, if none is
// known.
void* next_definition(const char* name, std::atomic<void*>& slot);

// The calls each hooked library function has received (kLibraryHooks'
// order), for the trace's `library_calls`: which entry points the program's
// libraries are driven through. `hook` is LIBRARY_HOOK(name).
void count_library_call(std::size_t hook) noexcept;
std::uint64_t library_calls(std::size_t hook) noexcept;

template <std::size_t index>
constexpr std::size_t checked_library_hook() {
  static_assert(index != kNotALibraryHook, "not a name in kLibraryHooks (library_hooks.h)");
  return index;
}
// kLibraryHooks' index of `name`, found and checked at compile time.
#define LIBRARY_HOOK(name) (::vgpumem::interpose::checked_library_hook<::vgpumem::interpose::library_hook_index(#name)>())

// NEXT_AS names the type where the headers overload the name for C++.
#define NEXT_AS(name, type)                                                          \
  ([]() {                                                                            \
    static std::atomic<void*> slot{nullptr};                                         \
    return reinterpret_cast<type>(::vgpumem::interpose::next_definition(#name, slot)); \
  }())
#define NEXT(name) NEXT_AS(name, decltype(&name))

// One library call on this thread, open for its length as the pager's
// scope: the kernels it launches are tagged with `op` for the scheduler, and
// what it overwrites whole (when paged) is not copied in; a call that fails
// has that restored. A call a library makes into itself or another hooked
// library while one runs is inside it: it claims nothing of its own.
class LibraryCall {
 public:
  LibraryCall(LibraryOp op, const std::optional<ByteRange>& written, CUstream stream);
  ~LibraryCall();
  LibraryCall(const LibraryCall&) = delete;
  LibraryCall& operator=(const LibraryCall&) = delete;

  static bool inside_one();
  // Whether hooks forward untouched: in a child forked after CUDA was used,
  // or with VGPUMEM_LIBRARY_HOOKS=off.
  static bool passes_through();
  // The call's status, noted: only success (0 in every CUDA library's
  // status enum) lets the skipped bytes go.
  template <typename Status>
  Status returned(Status status) {
    completed_ = status == Status{};
    return status;
  }

 private:
  vmm::LibraryCallScope scope_;
  vmm::Pager* pager_ = nullptr;
  bool completed_ = false;
};

// The body of library hook `hook` (LIBRARY_HOOK(name)): `next` (the
// library's function, or null when no library defines it: then `missing`)
// run with `args` as one LibraryCall of `op`, what `claim()` says it
// overwrites whole and on `stream()`; both asked only when the call is not
// passed straight through (a forked child's).
template <typename Status, typename... Params, typename Claim, typename Stream, typename... Args>
Status call_library(std::size_t hook, Status (*next)(Params...), Status missing, LibraryOp op, Claim&& claim,
                    Stream&& stream, Args&&... args) {
  count_library_call(hook);
  if (next == nullptr) return missing;
  if (LibraryCall::passes_through()) return next(std::forward<Args>(args)...);
  LibraryCall call(op, claim(), stream());
  return call.returned(next(std::forward<Args>(args)...));
}

}  // namespace vgpumem::interpose
