#include "interpose/library_definitions.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <iterator>

#include <atomic>

#include "common/log.h"
#include "interpose/library_hooks.h"
#include "interpose/real_driver.h"
#include "shim/runtime.h"

namespace vgpumem::interpose {
namespace {

// Plain zero-initialised atomics: usable from a dlsym that a library
// constructor makes before this library's own initialisers have run. No
// lock anywhere here: a thread may hold the loader's lock while it asks
// dlsym, and every dlopen below takes it.
std::atomic<void*> g_definitions[kLibraryHookCount];  // what each hook forwards to, once known
std::atomic<void*> g_hooks[kLibraryHookCount];        // our own export of each name
std::atomic<bool> g_second_definition_logged[kLibraryHookCount];
std::atomic<void*> g_self{nullptr};  // a handle of libvgpumem.so

// Handles of the objects recorded definitions live in, each taken once and
// kept (the hooks may call into the object at any time, so it must never be
// unloaded under them). Far more than cuBLAS, cuBLASLt, cuDNN and CUPTI need.
constexpr std::size_t kMaxLibraryObjects = 16;
std::atomic<void*> g_objects[kMaxLibraryObjects];

// A handle of the object that holds `address` (a reference taken), or null.
void* object_holding(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return nullptr;
  // The object is loaded (`address` is in it): this only takes a reference.
  void* object = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  static_cast<void>(dlerror());  // the caller's answer is not ours to spoil
  return object;
}

void* self_object() {
  if (void* self = g_self.load(std::memory_order_acquire)) return self;
  void* self = object_holding(reinterpret_cast<const void*>(&answer_library_lookup));
  if (self == nullptr) return nullptr;
  void* published = nullptr;
  if (g_self.compare_exchange_strong(published, self, std::memory_order_acq_rel)) return self;
  dlclose(self);  // another thread's reference stands for ours
  return published;
}

// Our export of kLibraryHooks[index]. Looked up on our own handle, which
// searches this object first: a definition of the same name earlier in the
// global scope (another interposer's) is not ours.
void* our_hook(std::size_t index) {
  if (void* hook = g_hooks[index].load(std::memory_order_acquire)) return hook;
  void* self = self_object();
  void* hook = self != nullptr ? real_dlsym(self, kLibraryHooks[index]) : nullptr;
  static_cast<void>(dlerror());
  if (hook != nullptr) g_hooks[index].store(hook, std::memory_order_release);
  return hook;
}

void remember_object_of(const void* definition) {
  void* object = object_holding(definition);
  if (object == nullptr) return;
  for (std::atomic<void*>& slot : g_objects) {
    void* held = nullptr;
    if (slot.compare_exchange_strong(held, object, std::memory_order_acq_rel)) return;
    if (held == object) break;  // dlopen gives one handle per object: already held
  }
  dlclose(object);  // already held, or no room (its own hooked names are still recorded)
}

void* in_remembered_objects(const char* name) {
  for (std::atomic<void*>& slot : g_objects) {
    void* object = slot.load(std::memory_order_acquire);
    if (object == nullptr) break;
    // A handle's look-up searches the object and its dependencies only:
    // never the preloaded libvgpumem.so.
    if (void* function = real_dlsym(object, name)) return function;
  }
  static_cast<void>(dlerror());
  return nullptr;
}

// A definition of `name` in any loaded object but ours, asking each in turn.
// For a library loaded RTLD_LOCAL that calls a hooked name of its own or of
// a dependency through its PLT (cuBLAS calling cuBLASLt): the global scope
// is searched first, so the call lands in our hook, though no dlsym ever
// revealed where the library is. Only ever from a hook, never from dlsym:
// the objects' names are collected under dl_iterate_phdr's lock, the look-ups
// made after it.
void* in_loaded_objects(const char* name) {
  Dl_info self{};
  if (dladdr(reinterpret_cast<const void*>(&answer_library_lookup), &self) == 0) return nullptr;
  struct Names {
    const char* self;
    const char* paths[256];
    std::size_t count;
  } names{self.dli_fname, {}, 0};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* collected = static_cast<Names*>(data);
        const char* path = info->dlpi_name;
        // The program itself (no name) answers from the global scope: ours first.
        if (path == nullptr || path[0] == '\0' || std::strcmp(path, collected->self) == 0) return 0;
        if (collected->count == std::size(collected->paths)) return 1;
        collected->paths[collected->count++] = path;
        return 0;
      },
      &names);
  void* found = nullptr;
  for (std::size_t i = 0; i < names.count && found == nullptr; ++i) {
    void* object = dlopen(names.paths[i], RTLD_LAZY | RTLD_NOLOAD);
    if (object == nullptr) continue;
    void* function = real_dlsym(object, name);  // the object and its dependencies: never the preload
    Dl_info where{};
    if (function != nullptr && dladdr(function, &where) != 0 && where.dli_fbase != self.dli_fbase) found = function;
    dlclose(object);
  }
  static_cast<void>(dlerror());
  return found;
}

// A library's definition of `name`: the first of the next one after us in
// the search order, one in an object a definition was recorded from,
// `revealed` (what a dlsym answer was about to give its caller; null from a
// hook) and one in any loaded object (so only ever from a hook: dlsym's
// look-ups always reveal one).
void* search_definition(const char* name, void* revealed) {
  void* found = real_dlsym(RTLD_NEXT, name);
  if (found == nullptr) found = in_remembered_objects(name);
  if (found == nullptr) found = revealed;
  if (found == nullptr) found = in_loaded_objects(name);
  static_cast<void>(dlerror());
  return found;
}

// The definition the hook of kLibraryHooks[index] forwards to
// (search_definition), decided once.
void* definition_of(std::size_t index, void* revealed) {
  std::atomic<void*>& slot = g_definitions[index];
  if (void* known = slot.load(std::memory_order_acquire)) return known;
  void* found = search_definition(kLibraryHooks[index], revealed);
  if (found == nullptr) return nullptr;
  void* published = nullptr;
  if (!slot.compare_exchange_strong(published, found, std::memory_order_acq_rel)) return published;
  remember_object_of(found);
  return found;
}

std::string_view file_of(const void* function) {
  Dl_info info{};
  return dladdr(function, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "?";
}

// Records the look-up; the trace never costs the caller its answer.
void note(const char* name, bool hooked) {
  try {
    note_lookup(trace::LookupPath::dlsym, name, 0, 0, hooked);
  } catch (...) {
  }
}

void warn_second_definition(std::size_t index, const void* found, const void* definition) {
  if (g_second_definition_logged[index].exchange(true, std::memory_order_relaxed)) return;
  try {
    VGPUMEM_LOG_WARN("dlsym found {} in {}, but vgpumem's hook forwards to the one in {}: that look-up is left "
                     "unhooked (two copies of the library loaded at once?)",
                     kLibraryHooks[index], file_of(found), file_of(definition));
  } catch (...) {
  }
}

}  // namespace

void* answer_library_lookup(std::size_t index, void* found) {
  if (found == nullptr) return nullptr;  // glibc has set the error the caller will read
  void* hook = our_hook(index);
  if (hook == nullptr) return found;  // never seen: our own export could not be found
  const char* name = kLibraryHooks[index];
  if (found == hook) {
    note(name, true);
    return hook;
  }
  void* definition = definition_of(index, found);
  if (definition == found) {
    note(name, true);
    return hook;
  }
  warn_second_definition(index, found, definition);
  note(name, false);
  return found;
}

void* library_definition(const char* name) {
  const std::size_t index = library_hook_index(name);
  return index != kNotALibraryHook ? definition_of(index, nullptr) : search_definition(name, nullptr);
}

}  // namespace vgpumem::interpose
