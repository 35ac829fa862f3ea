// Shared by the e2e probe programs: report, for a function pointer, which
// shared object and which exported symbol it is, as dladdr sees it.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstring>

// Prints "<label> <symbol> <object-basename>", or "<label> null -" when the
// look-up gave nothing.
inline void report_resolution(const char* label, const void* function) {
  if (function == nullptr) {
    std::printf("%s null -\n", label);
    return;
  }
  Dl_info info{};
  if (dladdr(function, &info) == 0) {
    std::printf("%s unknown unknown\n", label);
    return;
  }
  const char* object = info.dli_fname ? std::strrchr(info.dli_fname, '/') : nullptr;
  object = object ? object + 1 : (info.dli_fname ? info.dli_fname : "unknown");
  // dladdr names the nearest symbol; only an exact match identifies a function.
  const bool exact = info.dli_saddr == function;
  std::printf("%s %s %s\n", label, exact && info.dli_sname ? info.dli_sname : "unnamed", object);
}
