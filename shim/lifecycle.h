// Process lifecycle of the shim: configuration read and validated at load,
// the runtime created on first CUDA use, traces flushed at exit, and a child
// after fork starting clean.
#pragma once

#include "shim/config.h"

namespace vgpumem {

// The configuration of this process. Parsed once, at load time (by a
// constructor that only reads the environment: no CUDA work, no threads, no
// files) or on first use if some other library's constructor gets here first.
// A malformed configuration never returns: the process is stopped with one
// message naming the variable, its value and the accepted forms.
const Config& process_config();

}  // namespace vgpumem
