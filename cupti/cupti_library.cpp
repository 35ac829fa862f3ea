#include "cupti/cupti_library.h"

#include <dlfcn.h>

namespace vgpumem::cupti {
namespace {

template <typename Fn>
bool find(void* handle, SymbolLookup lookup, const char* name, Fn* slot) {
  *slot = reinterpret_cast<Fn>(lookup(handle, name));
  return *slot != nullptr;
}

bool find_all(void* handle, SymbolLookup lookup, CuptiLibrary* l) {
  return find(handle, lookup, "cuptiSubscribe", &l->subscribe) &&
         find(handle, lookup, "cuptiUnsubscribe", &l->unsubscribe) &&
         find(handle, lookup, "cuptiActivityRegisterCallbacks", &l->register_callbacks) &&
         find(handle, lookup, "cuptiActivityEnable", &l->enable) &&
         find(handle, lookup, "cuptiActivityDisable", &l->disable) &&
         find(handle, lookup, "cuptiActivityFlushAll", &l->flush_all) &&
         find(handle, lookup, "cuptiActivityGetNextRecord", &l->next_record) &&
         find(handle, lookup, "cuptiActivityGetNumDroppedRecords", &l->dropped_records) &&
         find(handle, lookup, "cuptiEnableCallback", &l->enable_callback);
}

}  // namespace

std::string describe_result(const CuptiLibrary& library, CUptiResult result) {
  std::string text = "error " + std::to_string(static_cast<int>(result));
  const char* name = nullptr;
  if (library.result_string != nullptr && library.result_string(result, &name) == CUPTI_SUCCESS && name != nullptr) {
    text += std::string(" (") + name + ")";
  }
  return text;
}

std::vector<std::string> cupti_candidates(const std::string& override_path, bool search_default_names) {
  std::vector<std::string> candidates;
  if (!override_path.empty()) candidates.push_back(override_path);
  if (search_default_names) {
    candidates.emplace_back("libcupti.so.13");
    candidates.emplace_back("libcupti.so");
  }
  return candidates;
}

bool load_cupti(const std::vector<std::string>& candidates, SymbolLookup lookup, CuptiLibrary* library,
                std::string* why) {
  why->clear();
  for (const std::string& path : candidates) {
    // RTLD_LOCAL: our copy's symbols must not become the program's.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = dlerror();
      *why += (why->empty() ? "" : "; ") + (error ? std::string(error) : path + ": not found");
      continue;
    }
    CuptiLibrary found;
    found.handle = handle;
    if (find_all(handle, lookup, &found)) {
      find(handle, lookup, "cuptiGetResultString", &found.result_string);
      *library = found;
      return true;
    }
    *why += (why->empty() ? "" : "; ") + path + ": lacks a function kernel timing needs";
    dlclose(handle);
  }
  return false;
}

}  // namespace vgpumem::cupti
