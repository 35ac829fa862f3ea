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
