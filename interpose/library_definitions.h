// Where the hooks of library functions (library_hooks.h) find the library.
//
// A program that links cuBLAS (NEEDED) or dlopens it RTLD_GLOBAL puts it in
// the global scope, after libvgpumem.so: an RTLD_NEXT look-up from here finds
// it. One that dlopens it RTLD_LOCAL and finds its functions with
// `dlsym` on the handle -- XLA/JAX, TensorFlow, cudnn-frontend, PyTorch's lazy
// loaders -- leaves it in no scope we can search. Our dlsym sees the
// library's function on its way to that caller (dlsym.cpp) and hands the
// caller our hook instead; the function it replaced is recorded here, with
// its object (a reference held for good: the hook may call into it at any
// time), in which the hooks then also find the library's other functions
// (cublasGetStream_v2, cudnnGetTensorNdDescriptor, ...).
//
// One definition per name, for good: the first found. A different one
// turning up later (a second copy of the library) is never substituted for
// -- its caller gets it unhooked, with one warning -- so a hook never
// forwards a call to a copy that did not make the handle it is given.
#pragma once

#include <cstddef>

// Note [Library hooks, however the library is found]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// How a library hook finds its definition (`library_hooks.h`,
// `library_definitions.{h,cpp}`). The hooks of cuBLAS, cuBLASLt, cuDNN and
// CUPTI functions are exported under the library's names, so a program or
// framework that links the library (NEEDED) binds to them, and each
// forwards to the library's definition, the next after libvgpumem.so in the
// search order. XLA/JAX, TensorFlow, cudnn-frontend and PyTorch's lazy
// loaders instead `dlopen` the library (`RTLD_LOCAL`) and ask
// `dlsym` for "cublasGemmEx" on that handle, which answers from that object, never
// from the preload. So our `dlsym` answers the library hook names like the
// driver's: on a handle, through `RTLD_DEFAULT` and through `RTLD_NEXT`
// (glibc's answer for the caller, as above), the library's own function is
// replaced by the hook. With `RTLD_LOCAL` no scope we can search holds the
// library, so the function the answer replaced is recorded as what the hook
// forwards to, with its object: a `dlopen(RTLD_NOLOAD)` reference kept for
// good (the hooks may call into it at any time), in which the hooks also
// find the library's functions they call themselves
// (`cublasGetStream_v2`, `cudnnGetTensorNdDescriptor`, …). The hook's
// definition is decided once, per name: the next in the search order, else
// one in an object already recorded, else the function the answer was about
// to give. A *different* definition turning up later — a second copy of the
// library at another path — is never substituted for: its caller gets its
// own function, unhooked, and the shim warns once per name, so no hook ever
// forwards a handle made by one copy to the other. A look-up from inside a
// library never loops back: `RTLD_NEXT` from cuBLAS finds only what
// follows cuBLAS (cuBLASLt's `cublasLtMatmul` becomes our hook, which
// forwards to cuBLASLt's own), a library's own definition is what its hook
// calls, never the hook, and calls a library makes into a hooked library
// while a hooked call runs claim nothing (`LibraryCall`, one scope a
// thread). Each answer is in the trace's look-up list (`path` dlsym,
// `hooked` true or false). What a library hook can still miss:
// - a library function found with `dlvsym` or through a table the library
//   hands out (cuDNN's backend is reached through `cudnnBackendExecute`, which
//   is hooked; cuBLAS has no such table), or called from inside the library
//   (a library built with `-Bsymbolic`, or a hidden alias) — those calls run
//   unhooked, correctly, without the no-copy-back saving or the layer tag;
// - a library loaded `RTLD_LOCAL` whose hooked functions the program never
//   asks `dlsym` for, but reaches through the library's own calls into an
//   exported name (which bind to the preloaded export first): the hook then
//   finds the definition in an object recorded from an earlier answer, or,
//   with none recorded, none at all (logged; the call fails with the
//   library's not-initialised status);
// - the second of two copies of a library loaded at once (above).
// Tested in `tests/e2e/library_dlsym_test.cpp`.

namespace vgpumem::interpose {

// What dlsym answers for the library hook with index `index` in
// kLibraryHooks, given glibc's answer `found` for the caller: our hook when
// `found` is the hook itself or the definition the hook forwards to (the
// first found decides), `found` otherwise. Recorded in the trace's
// look-ups. No CUDA work: dlsym may run under the loader lock.
void* answer_library_lookup(std::size_t index, void* found);

// The library's definition of `name`: for a hooked name, the one its hook
// forwards to; for any other name a hook calls, the next after
// libvgpumem.so in the search order, else the one in an object a recorded
// definition came from. Null if none is known yet; never ours.
void* library_definition(const char* name);

}  // namespace vgpumem::interpose
