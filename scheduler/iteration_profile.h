// An iteration as the planner sees it (Note [The profile
// of a step], below): its operations in issue order with how long each ran on the
// device, the units they touched, and the shape of the step — where the
// backward pass begins and which operations lead a layer.
//
// Built on the planner's thread from a timed RecordedIteration; pure data
// afterwards, so planners and their tests need no pager and no driver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "common/library_op.h"
#include "scheduler/access_log.h"

// Note [The profile of a step]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Profile (`scheduler/iteration_profile.{h,cpp}`): a timed recording
// becomes operations with durations (CUPTI's spans or the events around
// each) and stalls
// (the gap before each on its stream), units with their uses, the *turn*
// (where the bytes idle between two uses peak: the activations the forward
// pass keeps for the backward pass, and the weights it will use with them)
// and the *layer heads* (kernels more than twice the lower quartile's
// duration: convolutions and GEMMs among the normalisations and
// element-wise kernels). `ProfileSources` hides the pager, so planners and
// their tests run on synthetic steps.

namespace vgpumem::scheduler {

struct ProfileOp {
  std::uint64_t identity = 0;
  double duration_ns = 0;  // on the device, without waiting for its units
  double stall_ns = 0;     // how long it waited for its units (or its stream) before it ran
  double start_ns = 0;     // on the stall-free timeline: the sum of the durations before it
  bool kernel = false;     // a launch (not a copy, memset or stream memory operation)
  bool heavy = false;      // leads a layer: a kernel far longer than the typical one
  bool convolution = false;
  // A copy into host memory (the program's cuMemcpyDtoH*: a loss read, a
  // metric): it runs on the device's copy-out engine, behind every save of
  // the pager's issued before it.
  bool to_host = false;
  // Launched by a hooked library call (common/library_op.h): what the call
  // does, and whether this is the call's first operation.
  LibraryOp library = LibraryOp::none;
  bool call_start = false;
  std::uint32_t first_use = 0, use_count = 0;  // range in IterationProfile::uses
};

struct ProfileUnit {
  vmm::Unit* unit = nullptr;
  std::uint64_t bytes = 0;
  std::vector<std::uint32_t> uses;  // the operations that touched it, ascending
  std::vector<std::uint8_t> overwritten;  // parallel to `uses`: 1 where that use overwrites it whole
  // Whether its use `i` (an index into `uses`) overwrites it whole: the bytes
  // before need not come back for it.
  bool overwritten_at(std::size_t i) const { return i < overwritten.size() && overwritten[i] != 0; }
};

struct IterationProfile {
  std::vector<ProfileOp> ops;
  std::vector<std::uint32_t> uses;  // per operation: indexes into `units`
  // Parallel to `uses`: 1 where the operation overwrites the unit whole
  // before reading it (a library call said so): its bytes need not come
  // back for it.
  std::vector<std::uint8_t> overwrites;
  std::vector<ProfileUnit> units;   // each distinct unit once, in order of first use
  double step_ns = 0;               // the stall-free step: the sum of the durations
  double stall_ns = 0;              // what the recorded iteration waited, in all
  std::size_t backward_begins = 0;  // the first operation after the live-bytes peak
  std::uint64_t total_bytes = 0;    // of `units`: what the step needs if nothing moves
  // How many operations after a unit's last use an offload of it can be
  // issued: the pager's launch grace, K (vmm/launch_grace.h). The feed hears
  // of an operation once it is enqueued and its holds are dropped, so with
  // no grace a unit goes as its last use is enqueued (its copy waits for
  // it), and with K as the K-th operation after it is.
  std::size_t offload_delay = 1;
  // Which recorded stream it came from (AccessLog::follow tells the launch
  // path where the stream stands on the same terms).
  const void* log = nullptr;
  std::uint64_t lock = 0;
  int device = 0;

  std::size_t period() const { return ops.size(); }
  // Whether use `at` (an index into `uses`) overwrites its unit whole.
  bool overwrites_at(std::size_t at) const { return at < overwrites.size() && overwrites[at] != 0; }
  // Time at which operation `op` of iteration `round` (0 = this one) starts
  // and ends on the unrolled stall-free timeline.
  double start(std::size_t op, std::size_t round = 0) const {
    return static_cast<double>(round) * step_ns + ops[op].start_ns;
  }
  double end(std::size_t op, std::size_t round = 0) const { return start(op, round) + ops[op].duration_ns; }
};

// What the profile needs to know beyond the recorded iteration.
struct ProfileSources {
  // The duration and the stall of the iteration's operation `op` (its
  // index), in nanoseconds (negative: unknown).
  std::function<void(std::size_t op, double* duration, double* stall)> time;
  std::function<std::uint64_t(const vmm::Unit* unit)> bytes;
  std::function<bool(CUfunction function)> convolution;  // by the kernel's name; may be empty
};

// The profile of `iteration`; an operation of unknown duration counts as
// the median of the known ones (1 µs if none is known).
IterationProfile build_profile(const RecordedIteration& iteration, const ProfileSources& sources);

// Whether a driver entry point's name is a copy into host memory
// (cuMemcpyDtoH, cuMemcpyDtoHAsync and their versions). A copy by address
// (cuMemcpy, cuMemcpyAsync) may go either way: not counted.
bool is_copy_to_host(std::string_view api);

// Where the backward pass begins: the first operation of a backward
// library call (a convolution's backward pass) when the step has any — the
// one after the longest stretch without one, since an iteration may start
// anywhere in the step — else the live-bytes curve's peak, where the units
// touched before and after (activations kept for the backward pass) weigh
// most. Exposed for tests.
std::size_t find_backward_begins(const IterationProfile& profile);
// Which operations lead a layer (ProfileOp::heavy): the first operation of
// each library call that computes (a convolution pass or a matrix
// multiply) when the step has any, else a kernel far longer than the
// typical one. Exposed for tests.
void mark_heavy(IterationProfile& profile);

}  // namespace vgpumem::scheduler
