// A process that pages, then forks a child that exits without touching CUDA
// (as a data-loader worker does). The child's exit runs the shim's exit
// handler, in a process where the pager's reclaimer thread does not exist.
//
// Prints "fork ok" and exits 0 when the child exited 0 and the parent's
// data is intact; "fork child ..." exits 4; a CUDA error exits 3.
#include <cuda.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_support.h"

int main() {
  constexpr std::size_t kBytes = 4u << 20, kInts = kBytes / 4, kBuffers = 6;
  use_primary_context();
  std::vector<CUdeviceptr> buffers(kBuffers);
  for (std::size_t i = 0; i < kBuffers; ++i) {  // beyond the cap: some are offloaded
    CHECK(cuMemAlloc(&buffers[i], kBytes));
    CHECK(cuMemsetD32(buffers[i], static_cast<unsigned>(i), kInts));
  }
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) return 3;
  if (child == 0) std::exit(0);  // atexit handlers run here
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::printf("fork child ended badly (status %#x)\n", static_cast<unsigned>(status));
    return 4;
  }
  for (std::size_t i = 0; i < kBuffers; ++i) {
    std::vector<unsigned> back(kInts);
    CHECK(cuMemcpyDtoH(back.data(), buffers[i], kBytes));
    for (unsigned value : back) {
      if (value != i) {
        std::printf("fork parent lost buffer %zu\n", i);
        return 4;
      }
    }
    CHECK(cuMemFree(buffers[i]));
  }
  std::printf("fork ok\n");
  return 0;
}
