// The CUPTI functions kernel timing uses, found in a libcupti loaded at run
// time: libvgpumem.so never links CUPTI, and works the same where it is absent.
#pragma once

#include <cupti.h>

#include <string>
#include <vector>

namespace vgpumem::cupti {

// How a function is found in a loaded library. The shim passes its own
// look-up (interpose/real_driver.h: real_dlsym), which cannot recurse into
// its dlsym override; tests pass glibc's.
using SymbolLookup = void* (*)(void* handle, const char* name);

struct CuptiLibrary {
  void* handle = nullptr;
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*dropped_records)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId) = nullptr;
  // Optional (only names errors in messages): null where the library lacks it.
  CUptiResult (*result_string)(CUptiResult, const char**) = nullptr;
};

// "error N (CUPTI_ERROR_NAME)", or "error N" where the library cannot name it.
std::string describe_result(const CuptiLibrary& library, CUptiResult result);

// The libraries tried, in order: `override_path` when not empty, then (if
// `search_default_names`) libcupti.so.13, CUDA 13's soname, then libcupti.so.
std::vector<std::string> cupti_candidates(const std::string& override_path, bool search_default_names);

// Loads the first candidate that has every function above. False (and
// `why` says what was tried) when none does.
bool load_cupti(const std::vector<std::string>& candidates, SymbolLookup lookup, CuptiLibrary* library,
                std::string* why);

}  // namespace vgpumem::cupti
