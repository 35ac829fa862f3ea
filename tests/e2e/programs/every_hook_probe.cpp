// Calls every entry point of the hooked set (interpose/hooked_functions.def)
// exactly once, as the program would find it (dlsym, which the preloaded
// shim answers with its hook), with the plainest arguments its type allows:
// zeros, null handles, and pointers to zeroed scratch memory. The driver
// answers most of them with an error; what is checked is that each reached
// its hook once (tests/e2e/hook_table_test.cpp reads the trace's
// calls_by_api). No cuInit: the simulated driver then touches little.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <type_traits>

#include "interpose/hook_table.h"

namespace {

// Large enough for any descriptor or array of outputs a zero count names.
alignas(64) unsigned char g_scratch[1 << 16];

// The plainest argument of type T: a pointer to zeroed scratch for a pointer
// to a complete object type (a descriptor, an output), null for an opaque
// handle (CUstream, CUcontext: pointers to incomplete structs), void* and
// function pointers, and zero for everything else.
template <typename T>
T plainest() {
  if constexpr (std::is_pointer_v<T>) {
    using Pointee = std::remove_cv_t<std::remove_pointer_t<T>>;
    if constexpr (!std::is_function_v<Pointee> && !std::is_void_v<Pointee> && requires { sizeof(Pointee); }) {
      std::memset(g_scratch, 0, sizeof g_scratch);
      return reinterpret_cast<T>(g_scratch);
    } else {
      return nullptr;
    }
  } else {
    return T{};
  }
}

template <typename Fn>
struct Call;
template <typename... Params>
struct Call<CUresult (*)(Params...)> {
  static CUresult with_plainest_arguments(void* function) {
    return reinterpret_cast<CUresult (*)(Params...)>(function)(plainest<Params>()...);
  }
};

int g_called = 0;
int g_missing = 0;

template <typename Fn>
void call(const char* symbol) {
  void* function = dlsym(RTLD_DEFAULT, symbol);
  if (function == nullptr) {
    std::printf("missing %s\n", symbol);
    ++g_missing;
    return;
  }
  const CUresult result = Call<Fn>::with_plainest_arguments(function);
  std::printf("called %s %d\n", symbol, static_cast<int>(result));
  std::fflush(stdout);
  ++g_called;
}

}  // namespace

int main() {
#define VGPUMEM_HOOK(symbol, pfn, base, version, flavour) call<pfn>(#symbol);
#include "interpose/hooked_functions.def"
#undef VGPUMEM_HOOK
  std::printf("every hook called %d missing %d\n", g_called, g_missing);
  return g_missing == 0 ? 0 : 1;
}
