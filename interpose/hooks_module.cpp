// Module and library unloads: a function handle of the unloaded code may be
// given to a new kernel with another parameter layout, so every cached
// layout is read again on its next launch (vmm/launch_args.h).
#include "interpose/hook_support.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

template <typename Unload>
CUresult unload(Unload&& real) {
  Runtime& runtime = Runtime::get();
  const CUresult result = real();
  if (result == CUDA_SUCCESS && runtime.pager() != nullptr) runtime.launch_args().module_unloaded();
  return result;
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuModuleUnload, (CUmodule module), (module)) {
  return unload([&] { return REAL(cuModuleUnload)(module); });
}

VGPUMEM_HOOK_DEFINE(cuLibraryUnload, (CUlibrary library), (library)) {
  return unload([&] { return REAL(cuLibraryUnload)(library); });
}
