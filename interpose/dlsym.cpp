// The decision half of our dlsym override; the trampoline is dlsym_trampoline.S.
//
// Only names of the form cu[A-Z]* that are in the hooked set are ever
// answered here, and only when the caller's look-up would have found the real
// driver's function (or our own export). Everything else -- cudnn*, cublas*,
// every non-CUDA name, every RTLD_NEXT look-up -- goes to glibc untouched.
// Nothing here does CUDA work: dlsym may run under the loader lock.
#include <dlfcn.h>

#include "interpose/hook_table.h"
#include "interpose/real_driver.h"
#include "shim/runtime.h"

// The first decision -- is this a driver name at all? -- runs for every dlsym
// in the process, including those a sanitizer runtime makes while it starts,
// before its shadow memory exists. That path must not be instrumented.
#define VGPUMEM_UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined", "thread")))

extern "C" {
// Read by the trampoline. Hidden so it is addressed PC-relative, with no GOT.
__attribute__((visibility("hidden"))) void* vgpumem_glibc_dlsym = nullptr;
__attribute__((visibility("hidden"))) VGPUMEM_UNINSTRUMENTED void* vgpumem_dlsym_intercept(void* handle,
                                                                                           const char* name);
}

namespace vgpumem::interpose {
namespace {

using DlsymFn = void* (*)(void*, const char*);

VGPUMEM_UNINSTRUMENTED DlsymFn glibc_dlsym() {
  void* fn = __atomic_load_n(&vgpumem_glibc_dlsym, __ATOMIC_ACQUIRE);
  if (fn == nullptr) {
    // dlsym moved into libc.so.6 at glibc 2.34; older glibc only has 2.2.5.
    // (Plain calls only: this may run before a sanitizer runtime is ready.)
    fn = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (fn == nullptr) fn = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    __atomic_store_n(&vgpumem_glibc_dlsym, fn, __ATOMIC_RELEASE);
  }
  return reinterpret_cast<DlsymFn>(fn);
}

// Is `function` inside a CUDA driver object? Before we have loaded the driver
// ourselves, recognise one by its exports rather than by its file name, so a
// driver at any path (or the simulated one) counts.
bool is_driver_function(void* function) {
  if (RealDriver* driver = RealDriver::get_if_loaded()) return driver->owns(function);
  Dl_info info{};
  if (dladdr(function, &info) == 0 || info.dli_fname == nullptr) return false;
  void* object = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (object == nullptr) return false;
  const bool is_driver = real_dlsym(object, "cuGetProcAddress_v2") != nullptr &&
                         real_dlsym(object, "cuInit") != nullptr;
  dlclose(object);
  return is_driver;
}

}  // namespace

void* real_dlsym(void* handle, const char* name) {
  DlsymFn fn = glibc_dlsym();
  return fn ? fn(handle, name) : nullptr;
}

}  // namespace vgpumem::interpose

namespace {

// Everything after the first decision: only for cu[A-Z]* names, which no
// sanitizer runtime looks up.
void* intercept_driver_name(void* handle, const char* name) {
  using namespace vgpumem::interpose;
  if (loading_driver_on_this_thread()) return nullptr;
  const HookEntry* entry = find_hook_by_symbol(name);
  if (entry == nullptr) return nullptr;

  void* found = real_dlsym(handle, name);
  if (found == nullptr) return nullptr;  // glibc reports "not found" to the caller itself
  const auto id = static_cast<HookId>(entry - &hook_entry(HookId{}));
  void* hook = hook_address(id);
  const bool hooked = found == hook || is_driver_function(found);
  vgpumem::note_lookup(vgpumem::trace::LookupPath::dlsym, name, 0, 0, hooked);
  return hooked ? hook : nullptr;
}

}  // namespace

void* vgpumem_dlsym_intercept(void* handle, const char* name) {
  if (vgpumem::interpose::glibc_dlsym() == nullptr) return nullptr;  // cannot happen with glibc
  // Written out rather than calling is_driver_name(): a call into instrumented
  // code is exactly what must not happen here.
  if (name == nullptr || name[0] != 'c' || name[1] != 'u' || name[2] < 'A' || name[2] > 'Z') return nullptr;
  return intercept_driver_name(handle, name);
}

#if !defined(__x86_64__)
// Without the trampoline, RTLD_NEXT look-ups by other libraries are answered
// relative to libvgpumem.so. Only x86-64 is supported for now.
#error "libvgpumem.so needs a dlsym trampoline for this architecture (see dlsym_trampoline.S)"
#endif
