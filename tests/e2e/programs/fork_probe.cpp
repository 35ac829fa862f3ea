// Forks a process that pages, two ways:
//
//   fork_probe          a hundred children, one after another, exit
//                       without touching CUDA (as data-loader workers do).
//                       Each exit runs the shim's exit handler, in a process
//                       where the pager's reclaimer thread and the
//                       scheduler's planning thread do not exist (and may
//                       have held their locks at the fork).
//   fork_probe held     the fork happens while another thread is inside the
//                       shim holding the pager's lock: an allocation past the
//                       cap offloads, and the simulated driver parks the
//                       cuMemHostAlloc the pager makes under its lock for the
//                       host copy (vgpusimStallNext). The child then
//                       allocates, frees (its own memory and a paged pointer
//                       it inherited), has the shim log, and exits; it must
//                       do all of that within 10 s (SIGALRM otherwise). The
//                       parent then lets the parked call go on and checks
//                       every byte.
//   fork_probe logging  the same, with the thread holding the pager's lock
//                       inside the shim's logger as well: stderr is a full
//                       pipe, and the thread is blocked writing a debug line
//                       (VGPUMEM_LOG_LEVEL=debug: "offloaded ..."), holding
//                       the logger's locks. The child's own log line must
//                       still come out. (The parent drains the pipe once it
//                       has forked, and copies it to the real stderr.)
//
// Prints "fork ok" and exits 0 when the child exited 0 and the parent's
// data is intact; "fork child ..." exits 4 (a child killed by SIGALRM was
// stuck on a lock); a CUDA error exits 3; "fork setup ..." exits 5.
#include <cuda.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "probe_support.h"
#include "vgpusim.h"

namespace {

constexpr std::size_t kBytes = 4u << 20, kInts = kBytes / 4;

// stderr as a pipe (logging mode): its read end, the real stderr, and how
// many bytes of filler are still in the pipe (not copied).
int g_pipe_read = -1, g_real_stderr = -1;
std::size_t g_filler = 0;

// Moves what is in the pipe to the real stderr.
void drain_stderr_pipe() {
  if (g_pipe_read < 0) return;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(g_pipe_read, buffer, sizeof buffer);
    if (n <= 0) return;
    std::size_t skip = std::min(g_filler, static_cast<std::size_t>(n));
    g_filler -= skip;
    if (write(g_real_stderr, buffer + skip, static_cast<std::size_t>(n) - skip) < 0) return;
  }
}

// Waits for the child, for at most `seconds`; kills it if it is still there.
int wait_for_child(pid_t child, int seconds) {
  int status = 0;
  for (int i = 0; i < seconds * 100; ++i) {
    drain_stderr_pipe();
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) {
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
      std::printf("fork child ended badly (status %#x%s)\n", static_cast<unsigned>(status),
                  WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? ", stuck: killed by its alarm" : "");
      return 4;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  std::printf("fork child hung\n");
  return 4;
}

bool holds(CUdeviceptr buffer, unsigned value) {
  std::vector<unsigned> back(kInts);
  CHECK(cuMemcpyDtoH(back.data(), buffer, kBytes));
  for (unsigned v : back) {
    if (v != value) return false;
  }
  return true;
}

// The child of `held`: every call must come back, whatever it answers.
[[noreturn]] void held_child(CUdeviceptr inherited) {
  alarm(10);
  CUdeviceptr own = 0;
  const CUresult allocated = cuMemAlloc(&own, 1u << 20);
  const CUresult freed = allocated == CUDA_SUCCESS ? cuMemFree(own) : CUDA_SUCCESS;
  const CUresult freed_inherited = cuMemFree(inherited);  // a paged pointer of the parent's
  std::size_t free_bytes = 0, total_bytes = 0;
  const CUresult info = cuMemGetInfo(&free_bytes, &total_bytes);
  std::printf("fork child %d: alloc %d free %d free-inherited %d info %d\n", static_cast<int>(getpid()),
              static_cast<int>(allocated), static_cast<int>(freed), static_cast<int>(freed_inherited),
              static_cast<int>(info));
  std::fflush(stdout);
  std::exit(0);  // atexit handlers run here (the shim's writes the child's trace)
}

// True once thread `tid` of this process is blocked in write(2) on fd 2.
bool writing_to_stderr(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/syscall");
  std::string number, fd;
  return static_cast<bool>(in >> number >> fd) && number == "1" && fd == "0x2";
}

// Makes stderr a full pipe (logging mode). The shim's next line blocks.
bool stderr_into_a_full_pipe() {
  int fds[2];
  if (pipe(fds) != 0) return false;
  g_real_stderr = dup(STDERR_FILENO);
  fcntl(fds[1], F_SETPIPE_SZ, 4096);
  dup2(fds[1], STDERR_FILENO);
  close(fds[1]);
  g_pipe_read = fds[0];
  fcntl(g_pipe_read, F_SETFL, O_NONBLOCK);
  return true;
}

bool fill_stderr_pipe() {
  drain_stderr_pipe();
  const int flags = fcntl(STDERR_FILENO, F_GETFL);
  fcntl(STDERR_FILENO, F_SETFL, flags | O_NONBLOCK);
  static const char filler[512] = {};
  for (ssize_t n = 0; (n = write(STDERR_FILENO, filler, sizeof filler)) > 0;) g_filler += static_cast<std::size_t>(n);
  while (write(STDERR_FILENO, filler, 1) > 0) ++g_filler;
  fcntl(STDERR_FILENO, F_SETFL, flags);
  return errno == EAGAIN;
}

int held(bool logging) {
  if (logging && !stderr_into_a_full_pipe()) return 5;
  const CUcontext context = use_primary_context();
  CUdeviceptr first = 0;
  CHECK(cuMemAlloc(&first, kBytes));
  CHECK(cuMemsetD32(first, 1u, kInts));
  // The second allocation takes the cap's last chunks and offloads the first
  // buffer: its host copy's pinned memory, allocated under the pager's lock,
  // parks.
  if (!logging && vgpusimStallNext("hostalloc") != CUDA_SUCCESS) {
    std::printf("fork setup: no stall\n");
    return 5;
  }
  std::atomic<CUresult> second_result{CUDA_ERROR_UNKNOWN};
  std::atomic<pid_t> inside_tid{0};
  CUdeviceptr second = 0;
  if (logging && !fill_stderr_pipe()) return 5;
  std::thread inside([&] {
    inside_tid = static_cast<pid_t>(syscall(SYS_gettid));
    CHECK(cuCtxSetCurrent(context));
    second_result = cuMemAlloc(&second, 3 * kBytes);
  });
  if (logging) {
    // Not parked in the driver: blocked on the full pipe, logging the offload.
    for (int i = 0; i < 1000 && (inside_tid == 0 || !writing_to_stderr(inside_tid)); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!writing_to_stderr(inside_tid)) {
      std::printf("fork setup: the thread never blocked writing to stderr\n");
      std::fflush(stdout);
      std::_Exit(5);
    }
  } else {
    for (int i = 0; i < 1000 && !vgpusimStalled(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!logging && !vgpusimStalled()) {
    std::printf("fork setup: no cuMemHostAlloc was parked\n");
    std::fflush(stdout);
    std::_Exit(5);  // a thread is still inside the shim
  }
  // The pager's lock is held now: a third thread's paged call cannot finish.
  std::atomic<bool> third_done{false};
  CUdeviceptr third = 0;
  std::atomic<CUresult> third_result{CUDA_ERROR_UNKNOWN};
  std::thread blocked([&] {
    CHECK(cuCtxSetCurrent(context));
    third_result = cuMemAlloc(&third, kBytes);
    third_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  if (third_done) {
    std::printf("fork setup: the pager's lock is not held while cuMemHostAlloc is parked\n");
    std::fflush(stdout);
    std::_Exit(5);
  }
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) return 3;
  if (child == 0) held_child(first);
  // The parent's later lines go to the real stderr; the child's come through
  // the pipe, drained while waiting for it.
  if (logging) dup2(g_real_stderr, STDERR_FILENO);
  const int child_status = wait_for_child(child, 20);
  vgpusimReleaseStall();
  drain_stderr_pipe();
  inside.join();
  blocked.join();
  drain_stderr_pipe();
  if (child_status != 0) return child_status;
  CHECK(second_result.load());
  CHECK(third_result.load());
  CHECK(cuMemsetD32(second, 2u, 3 * kInts));
  CHECK(cuMemsetD32(third, 3u, kInts));
  if (!holds(first, 1u) || !holds(second, 2u) || !holds(second + kBytes, 2u) || !holds(second + 2 * kBytes, 2u) ||
      !holds(third, 3u)) {
    std::printf("fork parent lost data\n");
    return 4;
  }
  for (CUdeviceptr buffer : {first, second, third}) CHECK(cuMemFree(buffer));
  std::printf("fork ok\n");
  return 0;
}

int exits() {
  constexpr std::size_t kBuffers = 6;
  constexpr int kChildren = 300;
  use_primary_context();
  std::vector<CUdeviceptr> buffers(kBuffers);
  for (std::size_t i = 0; i < kBuffers; ++i) {  // beyond the cap: some are offloaded
    CHECK(cuMemAlloc(&buffers[i], kBytes));
    CHECK(cuMemsetD32(buffers[i], static_cast<unsigned>(i), kInts));
  }
  std::fflush(stdout);
  // Many children, one after another: each fork lands somewhere in what the
  // shim's threads are doing (the planner takes its lock every few
  // milliseconds), and none of the children may wait on a lock of theirs.
  for (int i = 0; i < kChildren; ++i) {
    const pid_t child = fork();
    if (child < 0) return 3;
    if (child == 0) {
      alarm(10);
      std::exit(0);  // atexit handlers run here
    }
    // Blocking: the child's alarm ends a stuck one.
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::printf("fork child %d of %d ended badly (status %#x%s)\n", i + 1, kChildren, static_cast<unsigned>(status),
                  WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? ", stuck: killed by its alarm" : "");
      return 4;
    }
  }
  for (std::size_t i = 0; i < kBuffers; ++i) {
    if (!holds(buffers[i], static_cast<unsigned>(i))) {
      std::printf("fork parent lost buffer %zu\n", i);
      return 4;
    }
    CHECK(cuMemFree(buffers[i]));
  }
  std::printf("fork ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "exit";
  if (mode == "held" || mode == "logging") return held(mode == "logging");
  return exits();
}
