// cupti::KernelTimes pointed at the simulated libcupti.so.13 at `library_path`
// (never searching for a real one), looked up with glibc's dlsym: what the
// CUPTI tests and the CUPTI benchmark start it with.
#pragma once

#include <dlfcn.h>

#include "cupti/kernel_times.h"

inline void* glibc_dlsym(void* handle, const char* name) { return ::dlsym(handle, name); }

inline vgpumem::cupti::KernelTimesOptions simulated_cupti_options(const char* library_path) {
  vgpumem::cupti::KernelTimesOptions options;
  options.lookup = &glibc_dlsym;
  options.library_path = library_path;
  options.search_default_names = false;
  return options;
}
