#include "vmm/program_streams.h"

#include <algorithm>

namespace vgpumem::vmm {

void ProgramStreams::created(CUstream stream, unsigned flags, CUcontext context, int device) {
  if ((flags & CU_STREAM_NON_BLOCKING) == 0 || stream == nullptr) return;
  destroyed(stream);  // a handle the driver gave out again
  streams_.push_back(Listed{stream, context, device});
}

void ProgramStreams::destroyed(CUstream stream) {
  std::erase_if(streams_, [stream](const Listed& listed) { return listed.stream == stream; });
}

void ProgramStreams::context_destroyed(CUcontext context) {
  std::erase_if(streams_, [context](const Listed& listed) { return listed.context == context; });
}

}  // namespace vgpumem::vmm
