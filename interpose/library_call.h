// What the hooks of libraries (cuBLAS, cuBLASLt) share: finding the
// library's own definition of a function, and one call with what it
// overwrites whole as the pager's scope for its length
// (vmm/overwrite_scope.h).
#pragma once

#include <atomic>
#include <optional>

#include <cuda.h>

#include "interpose/gemm_operands.h"
#include "vmm/overwrite_scope.h"

namespace vgpumem::vmm {
class Pager;
}

namespace vgpumem::interpose {

// Exported from libvgpumem.so with the library's own name.
#define VGPUMEM_LIBRARY_HOOK extern "C" __attribute__((visibility("default")))

// The definition of `name` that follows ours in the search order (the
// library's), looked up once into `slot`; null, logged, if there is none.
void* next_definition(const char* name, std::atomic<void*>& slot);

// NEXT_AS names the type where the headers overload the name for C++.
#define NEXT_AS(name, type)                                                          \
  ([]() {                                                                            \
    static std::atomic<void*> slot{nullptr};                                         \
    return reinterpret_cast<type>(::vgpumem::interpose::next_definition(#name, slot)); \
  }())
#define NEXT(name) NEXT_AS(name, decltype(&name))

// One library call on this thread. What it overwrites whole, when that is
// paged memory, is not copied in for the length of the call; a call that
// fails has it restored. A call a library makes into itself or another
// hooked library while one runs is inside it: it claims nothing of its own.
class OverwritingCall {
 public:
  OverwritingCall(const std::optional<ByteRange>& written, CUstream stream);
  ~OverwritingCall();
  OverwritingCall(const OverwritingCall&) = delete;
  OverwritingCall& operator=(const OverwritingCall&) = delete;

  static bool inside_one();
  // The call's status, noted: only success (0 in every CUDA library's
  // status enum) lets the skipped bytes go.
  template <typename Status>
  Status returned(Status status) {
    completed_ = status == Status{};
    return status;
  }

 private:
  vmm::OverwriteScope scope_;
  vmm::Pager* pager_ = nullptr;
  bool completed_ = false;
};

}  // namespace vgpumem::interpose
