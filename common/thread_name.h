// Names the calling thread, as `top -H`, gdb, perf, Nsight Systems and the
// simulated driver's timeline show it: the shim's own threads are told apart
// from the program's there. Linux keeps 15 characters.
#pragma once

#include <pthread.h>

namespace vgpumem {

inline void name_this_thread(const char* name) { ::pthread_setname_np(::pthread_self(), name); }

}  // namespace vgpumem
