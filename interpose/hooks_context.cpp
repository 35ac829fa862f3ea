// Streams the program makes: after the real call, the pager lists each
// non-blocking one, so that cuMemFree can wait for the program's work
// without waiting for the pager's own copies (vmm/program_streams.h). A
// green context's stream is not listed: from then on a free synchronises
// whole contexts.
//
// Streams and contexts the program destroys: before the real call, while
// they still exist, the pager waits for their work and frees the stream
// bits that named them (a new stream may get the same handle, and must not
// inherit what the old one did), and drops its own work in a context that
// goes (vmm/stream_registry.h).
#include "interpose/hook_support.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

// The pager, if it already exists (a program that never paged has nothing to forget).
vmm::Pager* existing_pager() {
  Runtime& runtime = Runtime::get();
  return runtime.pager_if_created();
}

// A stream the program made (`made`: the real call's result), told to the
// pager, made now if paging is wanted: it must know every stream made
// before its first free.
CUresult note_made(CUresult made, CUstream* stream, unsigned flags, bool listed = true) {
  if (made == CUDA_SUCCESS) {
    if (vmm::Pager* pager = Runtime::get().pager()) pager->stream_created(*stream, flags, listed);
  }
  return made;
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuStreamCreate, (CUstream* stream, unsigned flags), (stream, flags)) {
  return note_made(REAL(cuStreamCreate)(stream, flags), stream, flags);
}

VGPUMEM_HOOK_DEFINE(cuStreamCreateWithPriority, (CUstream* stream, unsigned flags, int priority),
                    (stream, flags, priority)) {
  return note_made(REAL(cuStreamCreateWithPriority)(stream, flags, priority), stream, flags);
}

VGPUMEM_HOOK_DEFINE(cuGreenCtxStreamCreate, (CUstream* stream, CUgreenCtx context, unsigned flags, int priority),
                    (stream, context, flags, priority)) {
  return note_made(REAL(cuGreenCtxStreamCreate)(stream, context, flags, priority), stream, flags, false);
}

VGPUMEM_HOOK_DEFINE(cuStreamDestroy_v2, (CUstream stream), (stream)) {
  if (vmm::Pager* pager = existing_pager()) pager->stream_destroyed(stream);
  return REAL(cuStreamDestroy_v2)(stream);
}

VGPUMEM_HOOK_DEFINE(cuCtxDestroy_v2, (CUcontext context), (context)) {
  if (vmm::Pager* pager = existing_pager()) pager->context_destroyed(context);
  return REAL(cuCtxDestroy_v2)(context);
}

VGPUMEM_HOOK_DEFINE(cuDevicePrimaryCtxReset_v2, (CUdevice device), (device)) {
  if (vmm::Pager* pager = existing_pager()) pager->primary_context_reset(device);
  return REAL(cuDevicePrimaryCtxReset_v2)(device);
}
