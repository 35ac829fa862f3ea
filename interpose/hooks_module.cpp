// Module and library unloads: a function handle of the unloaded code may be
// given to a new kernel with another parameter layout, so every cached
// layout is read again on its next launch (vmm/launch_args.h).
#include "interpose/hook_support.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

template <typename Unload>
CUresult unload(HookId id, Unload&& real) {
  Runtime& runtime = Runtime::get();
  runtime.count(id);
  const CUresult result = real();
  if (result == CUDA_SUCCESS && runtime.pager() != nullptr) runtime.launch_args().module_unloaded();
  return result;
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuModuleUnload, (CUmodule module), (module)) {
  return unload(HookId::cuModuleUnload, [&] { return REAL(cuModuleUnload)(module); });
}

VGPUMEM_HOOK_DEFINE(cuLibraryUnload, (CUlibrary library), (library)) {
  return unload(HookId::cuLibraryUnload, [&] { return REAL(cuLibraryUnload)(library); });
}
