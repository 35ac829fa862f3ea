// The runtime as the preloaded library makes it: with this library's
// Platform (shim/platform.h), bound to the real driver and the hooks' counts.
#pragma once

#include "shim/runtime.h"

namespace vgpumem::interpose {

// Installs this library's platform and makes the runtime. The slow path of
// runtime(); every entry point of the library reaches the runtime through it.
Runtime& make_runtime();

// The runtime, made on first use with this library's platform. The hook
// boundary calls it before any body runs (hook_support.h), so bodies may use
// Runtime::get(); the library and CUPTI hooks call it too.
inline Runtime& runtime() {
  if (Runtime* made = Runtime::get_if_created()) [[likely]] return *made;
  return make_runtime();
}

}  // namespace vgpumem::interpose
