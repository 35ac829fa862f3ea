// The slow half of hook_boundary (hook_support.h): what a hook does when its
// body threw, and the warning of a forked child's first pass-through call.
#include <atomic>
#include <cstdio>
#include <new>
#include <stdexcept>

#include "interpose/hook_support.h"
#include "shim/log.h"

namespace vgpumem::interpose {
namespace {

// Enough lines to see what happened; not a flood when memory has run out.
constexpr unsigned kFailuresLogged = 16;
std::atomic<unsigned> g_failures{0};

// Logs a line already formatted into a fixed buffer: through the logger
// (its own formatting buffers are inline, so a short line allocates
// nothing), or, if even that fails, with write(2).
void log_error_line(const char* line) noexcept {
  try {
    VGPUMEM_LOG_ERROR("{}", line);
  } catch (...) {
    char fallback[320];
    std::snprintf(fallback, sizeof fallback, "[vgpumem] error: %s\n", line);
    write_stderr_line(fallback);
  }
}

}  // namespace

CUresult hook_failed(HookId id) noexcept {
  CUresult result = CUDA_ERROR_UNKNOWN;
  const char* what = "an exception of unknown type";
  try {
    throw;
  } catch (const std::bad_alloc&) {
    result = CUDA_ERROR_OUT_OF_MEMORY;
    what = "out of host memory (std::bad_alloc)";
  } catch (const std::length_error&) {
    result = CUDA_ERROR_OUT_OF_MEMORY;
    what = "a container outgrew its limit (std::length_error)";
  } catch (const std::exception& error) {
    what = error.what();  // alive until the caller's handler ends
  } catch (...) {
  }
  const unsigned failure = g_failures.fetch_add(1, std::memory_order_relaxed);
  if (failure < kFailuresLogged) {
    char line[256];
    std::snprintf(line, sizeof line, "%s failed inside vgpumem: %s; the call returns %s%s", api_name(id), what,
                  result == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_UNKNOWN",
                  failure + 1 == kFailuresLogged ? " (further failures are not logged)" : "");
    log_error_line(line);
  }
  return result;
}

void note_pass_through(HookId id) noexcept {
  static std::atomic<bool> warned{false};
  if (warned.load(std::memory_order_relaxed) || warned.exchange(true)) return;
  char line[256];
  std::snprintf(line, sizeof line,
                "%s in a process forked after it used CUDA: calls here go straight to the driver, with no cap and "
                "no paging (a forked child cannot use its parent's CUDA state)",
                api_name(id));
  try {
    VGPUMEM_LOG_WARN("{}", line);
  } catch (...) {
  }
}

}  // namespace vgpumem::interpose
