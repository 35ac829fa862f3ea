// The CUPTI entry points a profiler starts with (Nsight Systems, torch.profiler,
// any tool built on CUPTI). CUPTI has one subscriber and one set of activity
// buffer callbacks per process: if vgpumem holds them for kernel timing
// (cupti/kernel_times.h), the profiler's first call would fail or steal our
// callbacks. So each of these steps the runtime aside first -- once: flush,
// disable, unsubscribe -- then forwards to the CUPTI that follows us in the
// search order (or the program's own RTLD_LOCAL handle of it). Never break
// the user's profiler.
//
// Exported through exports.map's cu* (these are cupti*). Our own KernelTimes
// calls CUPTI through its dlopen handle and never reaches these.
#include <cupti.h>

#include <atomic>

#include "interpose/library_call.h"
#include "interpose/real_driver.h"
#include "interpose/runtime_platform.h"

#define VGPUMEM_CUPTI_EXPORT extern "C" __attribute__((visibility("default")))

// Note [Stepping aside for the user's profiler]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Never break the user's profiler: CUPTI has one subscriber and one set of
// buffer callbacks per process. `interpose/hooks_cupti.cpp` exports the entry
// points a profiler starts with — `cuptiSubscribe`, `cuptiSubscribe_v2`,
// `cuptiActivityRegisterCallbacks`, `cuptiActivityEnable`,
// `cuptiActivityEnableContext` — and each first makes the runtime step aside
// (once, for good: flush, disable our kinds, unsubscribe), then forwards to the
// program's CUPTI: the next definition in the search order, or, for a program
// that finds those functions with `dlsym` on its own handle of a `RTLD_LOCAL`
// libcupti, the function that look-up found (our `dlsym` answers it with the
// hook; see Note [Library hooks, however the library is found] in
// interpose/library_definitions.h). Only a program
// that finds them with `dlvsym` still bypasses the hooks; it then finds CUPTI
// taken while paging is on (set `VGPUMEM_CUPTI=off` for it).

namespace {

using namespace vgpumem;

// Never lets an exception or a forked child's stale lock reach the profiler.
void make_way_for_profiler(const char* entry) noexcept {
  if (passes_through()) return;
  try {
    interpose::runtime().step_aside_for_profiler(entry);
  } catch (...) {
    write_stderr_line("[vgpumem] error: could not step aside from CUPTI (out of memory)\n");
  }
}

}  // namespace

#define VGPUMEM_CUPTI_FORWARD(name, params, args)                                         \
  VGPUMEM_CUPTI_EXPORT CUptiResult name params {                                          \
    interpose::count_library_call(LIBRARY_HOOK(name));                                    \
    make_way_for_profiler(#name);                                                         \
    /* the program's libcupti: the next definition, or its RTLD_LOCAL handle's */        \
    const auto real = NEXT_AS(name, CUptiResult(*) params);                               \
    return real != nullptr ? real args : CUPTI_ERROR_NOT_INITIALIZED;                     \
  }

VGPUMEM_CUPTI_FORWARD(cuptiSubscribe, (CUpti_SubscriberHandle * subscriber, CUpti_CallbackFunc callback, void* user),
                      (subscriber, callback, user))
VGPUMEM_CUPTI_FORWARD(cuptiSubscribe_v2,
                      (CUpti_SubscriberHandle * subscriber, CUpti_CallbackFunc callback, void* user,
                       CUpti_SubscriberParams* params),
                      (subscriber, callback, user, params))
VGPUMEM_CUPTI_FORWARD(cuptiActivityRegisterCallbacks,
                      (CUpti_BuffersCallbackRequestFunc requested, CUpti_BuffersCallbackCompleteFunc completed),
                      (requested, completed))
VGPUMEM_CUPTI_FORWARD(cuptiActivityEnable, (CUpti_ActivityKind kind), (kind))
VGPUMEM_CUPTI_FORWARD(cuptiActivityEnableContext, (CUcontext context, CUpti_ActivityKind kind), (context, kind))
