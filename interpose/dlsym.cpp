// The decision half of our dlsym override; the trampoline is dlsym_trampoline.S.
//
// Only names in the hooked set are ever answered here: driver names
// (cu[A-Z]*, hook_table.h) and the library functions we hook (cublas*,
// cudnn*, cupti*; library_hooks.h). For those, the answer is glibc's answer
// for the *caller*, with the real function (or our own export) replaced by
// our hook -- the driver's, or the one library definition the hook forwards
// to (library_definitions.h):
//
//   on a real handle           glibc's answer does not depend on the caller:
//                              asked from here.
//   through RTLD_DEFAULT       glibc searches the caller's scope, and
//   or RTLD_NEXT               RTLD_NEXT the objects after the caller in it:
//                              the trampoline asks glibc on the caller's
//                              behalf (as if the caller had asked), then
//                              vgpumem_dlsym_decide substitutes.
//
// So a library before the driver in the search order that asks RTLD_NEXT for
// a driver name gets the hook (interposition keeps working), a library after
// the driver gets what follows it -- NULL when nothing does -- and a library
// whose own scope holds the driver (dlopen'ed with RTLD_LOCAL) gets the hook
// too. The same for library names: a program that dlopens libcublas.so.13
// RTLD_LOCAL and asks its handle for cublasGemmEx gets our hook, which
// forwards to the function that look-up found; cuBLAS asking RTLD_NEXT for
// a cuBLASLt function gets the hook of it, which forwards to cuBLASLt's own
// (never back into itself). Everything else -- the other cudnn*, cublas*,
// every non-CUDA name -- goes to glibc untouched, with the caller's return
// address.
// Nothing here does CUDA work: dlsym may run under the loader lock.
#include <dlfcn.h>
#include <link.h>

#include <cstdint>

#include "interpose/hook_table.h"
#include "interpose/library_definitions.h"
#include "interpose/library_hooks.h"
#include "interpose/real_driver.h"
#include "shim/runtime.h"

// The first decision -- is this a CUDA name at all? -- runs for every dlsym
// in the process, including those a sanitizer runtime makes while it starts,
// before its shadow memory exists. That path must not be instrumented.
#define VGPUMEM_UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined", "thread")))

extern "C" {
// Read by the trampoline. Hidden so it is addressed PC-relative, with no GOT.
__attribute__((visibility("hidden"))) void* vgpumem_glibc_dlsym = nullptr;
// The trampoline's two calls (see dlsym_trampoline.S for what they return).
__attribute__((visibility("hidden"))) VGPUMEM_UNINSTRUMENTED void* vgpumem_dlsym_intercept(void* handle,
                                                                                           const char* name,
                                                                                           const void* caller,
                                                                                           const void** gadget);
__attribute__((visibility("hidden"))) void* vgpumem_dlsym_decide(void* found, const char* name);
}

// Note [dlsym without breaking RTLD_NEXT]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// glibc answers `RTLD_NEXT`
// relative to the caller, found from the return address (and `RTLD_DEFAULT`
// in the caller's scope). A C++ wrapper would make every foreign
// `dlsym` with `RTLD_NEXT` relative to libvgpumem.so. So `dlsym` is an assembly
// trampoline (`dlsym_trampoline.S`), and the rule is: the answer is glibc's
// answer for the caller, with the real driver's function (or our own export)
// replaced by the hook.
// - A name that is neither a hooked `cu[A-Z]*` name nor a library hook
//   (the other `cudnn*` and `cublas*` names, every non-CUDA name): the
//   trampoline *jumps* to glibc's `dlsym` with the caller's arguments and
//   return address intact. The first test — `c`, `u`, then an upper-case
//   letter or `b`, `d`, `p` — is a few character compares in uninstrumented
//   code (it runs for a sanitizer runtime's own look-ups before its shadow
//   memory exists); only then is the name looked up: the driver table, or a
//   binary search of the library hooks sorted at compile time. No
//   allocation, no lock.
// - A hooked name on a real handle: glibc's answer does not depend on the
//   caller; we ask it and substitute.
// - A hooked name through `RTLD_NEXT` or `RTLD_DEFAULT`: the trampoline asks
//   glibc *on the caller's behalf*. It calls glibc's `dlsym` with a return
//   address inside the caller's object — the address of a `ret` instruction
//   there (a byte `0xc3` in one of its executable segments, found with
//   `dl_iterate_phdr`) — above which it has pushed its own continuation; glibc
//   returns to that `ret`, which comes back to the trampoline with glibc's
//   answer for the caller, and `vgpumem_dlsym_decide` substitutes. So a
//   library before the driver in the search order that asks `RTLD_NEXT` for
//   `cuMemAlloc_v2` gets the hook (interposition keeps working), a library
//   after the driver gets whatever follows it (another library's
//   definition, untouched, or NULL with glibc's `dlerror`), and a library
//   `dlopen`ed with the driver in its own local scope gets the hook.
//   (During that one glibc call a backtrace shows the caller's object as
//   glibc's caller. The trampoline carries no CET shadow-stack marking, so
//   the unmatched `ret` is never checked against one.)
// - A found function is the driver's if it lies in the driver we loaded, or,
//   before we have loaded it, if its object *itself* defines `cuInit` and
//   `cuGetProcAddress_v2` (found through a `RTLD_NOLOAD` handle of an object
//   already loaded; a library that only links libcuda, such as another
//   interposer, finds those in its dependencies and is not the driver). Our
//   own look-ups never leave a `dlerror` behind a non-NULL answer.
// - The real `dlsym` is found with `dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34")`
//   (then `GLIBC_2.2.5`), so our override is never re-entered. If it could not
//   be found, every `dlsym` answers NULL: the trampoline checks before every
//   jump and never jumps to address 0 (`tests/unit/dlsym_trampoline_test.cpp`
//   runs the trampoline alone against stand-ins).
// x86-64 only for now.

namespace vgpumem::interpose {
namespace {

using DlsymFn = void* (*)(void*, const char*);

// What vgpumem_dlsym_intercept returns to have glibc asked for the caller.
void* const kAskGlibcForTheCaller = reinterpret_cast<void*>(1);

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

// True if `name`, looked up in `object` (and its dependencies), is defined
// by the object whose load address is `base` itself.
bool defined_in(void* object, const char* name, const void* base) {
  void* function = real_dlsym(object, name);
  Dl_info info{};
  return function != nullptr && dladdr(function, &info) != 0 && info.dli_fbase == base;
}

// Is `function` inside a CUDA driver object? Before we have loaded the driver
// ourselves, recognise one by its exports rather than by its file name, so a
// driver at any path (or the simulated one) counts -- its own exports: a
// library that only links the driver (another interposer) finds cuInit in
// its dependencies, and is not the driver.
bool is_driver_function(void* function) {
  if (RealDriver* driver = RealDriver::get_if_loaded()) return driver->owns(function);
  Dl_info info{};
  if (dladdr(function, &info) == 0 || info.dli_fname == nullptr) return false;
  // The object is loaded (`function` is in it): this only takes a reference.
  void* object = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (object == nullptr) {
    static_cast<void>(dlerror());  // the caller's answer is not NULL: no error of ours may linger
    return false;
  }
  const bool is_driver =
      defined_in(object, "cuGetProcAddress_v2", info.dli_fbase) && defined_in(object, "cuInit", info.dli_fbase);
  dlclose(object);
  static_cast<void>(dlerror());
  return is_driver;
}

// The search for a `ret` instruction (0xc3) inside the object that holds
// `address`: any executable byte of that value returns when jumped to.
struct GadgetSearch {
  std::uintptr_t address;
  const void* gadget;
};

VGPUMEM_UNINSTRUMENTED int find_gadget(dl_phdr_info* info, std::size_t, void* data) {
  auto* search = static_cast<GadgetSearch*>(data);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    const std::uintptr_t start = info->dlpi_addr + segment.p_vaddr;
    holds = segment.p_type == PT_LOAD && search->address >= start && search->address - start < segment.p_memsz;
  }
  if (!holds) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_LOAD || (segment.p_flags & (PF_X | PF_R)) != (PF_X | PF_R)) continue;
    const auto* text = reinterpret_cast<const unsigned char*>(info->dlpi_addr + segment.p_vaddr);
    for (std::size_t at = 0; at < segment.p_filesz; ++at) {
      if (text[at] == 0xc3) {
        search->gadget = text + at;
        return 1;
      }
    }
  }
  return 1;  // the caller's object, with no ret in it (never seen)
}

VGPUMEM_UNINSTRUMENTED const void* gadget_in_object_of(const void* caller) {
  GadgetSearch search{reinterpret_cast<std::uintptr_t>(caller), nullptr};
  dl_iterate_phdr(&find_gadget, &search);
  return search.gadget;
}

// Records the look-up; the trace never costs the caller its answer.
void note(const char* name, bool hooked) {
  try {
    vgpumem::note_lookup(vgpumem::trace::LookupPath::dlsym, name, 0, 0, hooked);
  } catch (...) {
  }
}

// Our answer, given what glibc found for the caller.
void* substitute(void* found, const HookEntry& entry) {
  if (found == nullptr) return nullptr;  // glibc has set the error the caller will read
  void* hook = hook_address(static_cast<HookId>(&entry - &hook_entry(HookId{})));
  const bool hooked = found == hook || is_driver_function(found);
  note(entry.symbol, hooked);
  return hooked ? hook : found;
}

}  // namespace

void* real_dlsym(void* handle, const char* name) {
  DlsymFn fn = glibc_dlsym();
  return fn ? fn(handle, name) : nullptr;
}

}  // namespace vgpumem::interpose

namespace {

// Everything after the first decision: only for cu[A-Z]*, cub*, cud* and
// cup* names, which no sanitizer runtime looks up.

// RTLD_NEXT and RTLD_DEFAULT: glibc's answer for the caller decides, and
// vgpumem_dlsym_decide substitutes.
void* ask_glibc_for_the_caller(const void* caller, const void** gadget) {
  *gadget = vgpumem::interpose::gadget_in_object_of(caller);
  // Without a gadget (never seen), glibc answers unaided: never wrong, but unhooked.
  return *gadget != nullptr ? vgpumem::interpose::kAskGlibcForTheCaller : nullptr;
}

void* intercept_driver_name(void* handle, const char* name, const void* caller, const void** gadget) {
  using namespace vgpumem::interpose;
  if (loading_driver_on_this_thread()) return nullptr;
  const HookEntry* entry = find_hook_by_symbol(name);
  if (entry == nullptr) return nullptr;
  if (handle == RTLD_NEXT || handle == RTLD_DEFAULT) return ask_glibc_for_the_caller(caller, gadget);
  return substitute(real_dlsym(handle, name), *entry);
}

void* intercept_library_name(void* handle, const char* name, const void* caller, const void** gadget) {
  using namespace vgpumem::interpose;
  const std::size_t index = library_hook_index(name);
  if (index == kNotALibraryHook) return nullptr;
  if (handle == RTLD_NEXT || handle == RTLD_DEFAULT) return ask_glibc_for_the_caller(caller, gadget);
  return answer_library_lookup(index, real_dlsym(handle, name));
}

}  // namespace

void* vgpumem_dlsym_intercept(void* handle, const char* name, const void* caller, const void** gadget) {
  if (vgpumem::interpose::glibc_dlsym() == nullptr) return nullptr;  // the trampoline then answers NULL
  // Written out rather than calling is_driver_name() or is_library_name(): a
  // call into instrumented code is exactly what must not happen here.
  if (name == nullptr || name[0] != 'c' || name[1] != 'u') return nullptr;
  if (name[2] >= 'A' && name[2] <= 'Z') return intercept_driver_name(handle, name, caller, gadget);
  // cublas*, cudnn*, cupti* (and cuda*, which the table look-up turns away).
  if (name[2] == 'b' || name[2] == 'd' || name[2] == 'p') return intercept_library_name(handle, name, caller, gadget);
  return nullptr;
}

void* vgpumem_dlsym_decide(void* found, const char* name) {
  using namespace vgpumem::interpose;
  if (const HookEntry* entry = find_hook_by_symbol(name)) return substitute(found, *entry);
  const std::size_t index = library_hook_index(name);
  return index != kNotALibraryHook ? answer_library_lookup(index, found) : found;
}

#if !defined(__x86_64__)
// Without the trampoline, RTLD_NEXT look-ups by other libraries are answered
// relative to libvgpumem.so. Only x86-64 is supported for now.
#error "libvgpumem.so needs a dlsym trampoline for this architecture (see dlsym_trampoline.S)"
#endif
