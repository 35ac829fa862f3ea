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
