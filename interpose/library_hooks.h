// The functions of CUDA libraries (not the driver) that libvgpumem.so
// exports under the library's own name: hooks_cublas.cpp and
// hooks_cublaslt.cpp (matrix multiplies), hooks_cudnn.cpp and
// hooks_cudnn_backend.cpp (convolutions), hooks_cupti.cpp (the entry points
// a profiler starts with: vgpumem steps aside from CUPTI first). Each
// forwards to the library's definition (library_definitions.h); the
// build-time export check reads this list, and our dlsym answers these
// names with the hook (dlsym.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <iterator>
#include <cstddef>
#include <string_view>

// Note [Library calls]
// ~~~~~~~~~~~~~~~~~~~~
// A kernel's arguments say which memory it touches, not what it does with
// it. The libraries' own calls say more, so libvgpumem.so also exports a few
// of their functions under their own names (`interpose/library_hooks.h`):
// `cublasGemmEx`, `cublasGemmStridedBatchedEx` (and their `_64` forms),
// `cublasSgemm_v2`, `cublasLtMatmul`; cuDNN's legacy
// `cudnnConvolutionForward`, `…BackwardData`, `…BackwardFilter`,
// `…BackwardBias`, and its graph API's `cudnnBackendExecute` (with
// `cudnnBackendDestroyDescriptor`). A program or framework that links the
// library (`NEEDED`, as PyTorch links cuBLAS and cuDNN) finds the preloaded
// definitions first; each hook forwards to the library's own (the next
// definition in the search order), with the program's arguments unchanged,
// and returns its status. The shim never needs the libraries: a hook whose
// library is absent is never called.
//
// Each hook opens a `LibraryCallScope` (`vmm/library_call_scope.h`) on its
// thread for the length of the call, holding two things:
//
// * What the call is (`common/library_op.h`): a matrix multiply, or a
//   convolution's forward pass or its backward pass for the input, the
//   weights or the bias. The access feed tags every operation the call
//   launches with it and with the call's serial, so the scheduler's profile
//   of a step (`scheduler/iteration_profile.cpp`) knows exactly where layers
//   start — each computing call's first operation leads one, and when a step
//   has such calls nothing else does (an activation kernel longer than a
//   convolution no longer fools the duration rule) — and where the backward
//   pass begins: the first backward convolution call after the longest
//   stretch without one, wherever the recorded iteration happens to start.
//   The graph API says the pass only through its plan: the hook walks plan →
//   engine config → engine → operation graph → its operation once per plan
//   (cached until the plan is destroyed); a graph of anything but one
//   convolution pass runs as `other` and claims nothing.
// * What the call overwrites whole before reading it: a GEMM's C with
//   beta = 0, a cuBLASLt D that is not C (or beta = 0), a convolution's
//   output with beta = 0 — when its span holds nothing but its elements
//   (`interpose/operand_ranges.h`: no gap between columns or batches, a
//   packed tensor) and no input shares a byte with it. Beta is read only
//   where it is on the host (a device-side beta counts as non-zero). A unit
//   on the host that such a range covers comes back for the call's kernels
//   without the covered bytes copied in (`Pager::fetch`: the rest of the
//   unit, before and after the range, is copied as always); with nothing to
//   copy and chunks no save still reads, it is usable at once. Only the
//   calling thread's launches inside the call see the scope: any launch of
//   another thread that legitimately precedes the call in stream order was
//   enqueued, and so fetched with its bytes, before the call began. The
//   skipped bytes' host copy is kept until the call returns; a call that
//   fails has them copied back (wherever the unit is by then), so a failed
//   call never costs the buffer's old contents. The access record marks the
//   units a call overwrites whole (`Unit::requested`: every byte the program
//   can read of it is covered), the profile keeps it per use
//   (`IterationProfile::overwrites`), and the planner plans such a gap with
//   no copy back (`PlannedSwap::no_copy_in`): no prefetch is issued, the use
//   brings the unit back on demand without the link, and both the plan
//   simulator and the floor count no copy-in for it.
//
// A call a library makes into itself or another hooked library while one
// runs is inside it: one scope a thread, and the inner call claims nothing.

namespace vgpumem::interpose {

inline constexpr const char* kLibraryHooks[] = {
    "cublasGemmEx",   "cublasGemmEx_64",  "cublasGemmStridedBatchedEx", "cublasGemmStridedBatchedEx_64",
    "cublasSgemm_v2", "cublasLtMatmul",
    "cudnnConvolutionForward", "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter",
    "cudnnConvolutionBackwardBias", "cudnnBackendExecute", "cudnnBackendDestroyDescriptor",
    "cuptiSubscribe", "cuptiSubscribe_v2", "cuptiActivityRegisterCallbacks", "cuptiActivityEnable",
    "cuptiActivityEnableContext",
};
inline constexpr std::size_t kLibraryHookCount = std::size(kLibraryHooks);

// True for the prefixes of every library name above: what dlsym tests
// before it looks a name up (the test itself is written out in dlsym.cpp).
constexpr bool is_library_name(std::string_view name) {
  return name.starts_with("cublas") || name.starts_with("cudnn") || name.starts_with("cupti");
}

namespace detail {
// kLibraryHooks' indices in name order, for a binary search: no allocation
// and no lock, as dlsym may be asked anything from anywhere.
inline constexpr std::array<std::size_t, kLibraryHookCount> kLibraryHooksByName = [] {
  std::array<std::size_t, kLibraryHookCount> order{};
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [](std::size_t a, std::size_t b) {
    return std::string_view(kLibraryHooks[a]) < std::string_view(kLibraryHooks[b]);
  });
  return order;
}();
}  // namespace detail

inline constexpr std::size_t kNotALibraryHook = kLibraryHookCount;

// `name`'s index in kLibraryHooks, or kNotALibraryHook.
constexpr std::size_t library_hook_index(std::string_view name) {
  const auto& order = detail::kLibraryHooksByName;
  const auto* at = std::lower_bound(order.begin(), order.end(), name, [](std::size_t index, std::string_view wanted) {
    return std::string_view(kLibraryHooks[index]) < wanted;
  });
  return at != order.end() && std::string_view(kLibraryHooks[*at]) == name ? *at : kNotALibraryHook;
}

static_assert([] {
  for (std::size_t i = 0; i < kLibraryHookCount; ++i) {
    if (!is_library_name(kLibraryHooks[i]) || library_hook_index(kLibraryHooks[i]) != i) return false;
  }
  return true;
}(), "every library hook has a library prefix, is listed once and is found by name");
static_assert(library_hook_index("cublasGemm") == kNotALibraryHook && library_hook_index("cudnnCreate") == kNotALibraryHook &&
              library_hook_index("zzz") == kNotALibraryHook && library_hook_index("") == kNotALibraryHook);

}  // namespace vgpumem::interpose
