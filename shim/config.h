// Configuration: the VGPUMEM_* environment variables, parsed and validated.
//
// Parsing is pure (no CUDA, no logging) so it can run in the load-time
// constructor of every process the shim is preloaded into, and so that a
// malformed value stops the program before its main() with one clear message.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.h"
#include "vmm/check_mode.h"
#include "vmm/grace_kind.h"

namespace vgpumem {

// A memory cap: absent, an absolute number of bytes, or a share of the device.
struct MemoryLimit {
  enum class Kind { none, bytes, percent };
  Kind kind = Kind::none;
  std::uint64_t bytes = 0;  // Kind::bytes
  double percent = 0;       // Kind::percent, in (0, 100]

  bool is_set() const { return kind != Kind::none; }
  // The cap in bytes for a device with `device_total` bytes; UINT64_MAX when unset.
  std::uint64_t resolve(std::uint64_t device_total) const;
};

// How device memory beyond the cap is handled: `off` refuses allocations over
// the cap with the CUDA out-of-memory error; `lru` pages idle allocations to
// host on demand; `automatic` ("auto") learns the training step from the
// launches and moves units ahead of need on a cost-based plan (Capuchin's
// swap planner), on demand for the rest; `vdnn_all` and `vdnn_conv` follow
// vDNN's plans (every layer's input, or convolutions' only) as baselines.
enum class Policy { off, lru, automatic, vdnn_all, vdnn_conv };

// Where kernel durations come from: `automatic` ("auto") uses CUPTI's
// activity records when paging is on and CUPTI is present and free (no
// profiler holds it), timed events otherwise; `off` never loads CUPTI.
enum class CuptiUse { automatic, off };

// Which resident unit makes room first (vmm/victim_policy.h): `automatic`
// ("auto") orders by the learned step's next use under VGPUMEM_POLICY=auto
// and least recently used otherwise; `lru` always least recently used;
// `next_use` ("next-use") by the learned step's next use under any learned
// policy (auto, vdnn-all, vdnn-conv).
enum class VictimOrder { automatic, lru, next_use };

struct Config {
  MemoryLimit limit_all;                   // VGPUMEM_LIMIT
  std::map<int, MemoryLimit> limit_device; // VGPUMEM_LIMIT_<i>
  LogLevel log_level = LogLevel::warn;     // VGPUMEM_LOG_LEVEL
  std::string log_file;                    // VGPUMEM_LOG_FILE, %p expanded; empty = stderr
  std::string trace_path;                  // VGPUMEM_TRACE, %p expanded; empty = no trace
  std::string trace_path_pattern;          // VGPUMEM_TRACE as written, to re-expand in a forked child
  std::uint64_t trace_max_events = 1'000'000;  // VGPUMEM_TRACE_MAX_EVENTS
  std::string driver_path = "libcuda.so.1";    // VGPUMEM_DRIVER: the real driver to load
  Policy policy = Policy::off;             // VGPUMEM_POLICY; default auto when any limit is set
  std::optional<std::uint64_t> host_limit; // VGPUMEM_HOST_LIMIT: pinned host bytes; unset = no cap
  vmm::CheckMode check = vmm::CheckMode::fast;  // VGPUMEM_CHECK
  std::uint32_t grace_operations = 8;           // VGPUMEM_GRACE_LAUNCHES (vmm/launch_grace.h)
  vmm::GraceKind grace = vmm::GraceKind::lend;  // VGPUMEM_GRACE (vmm/table_lending.h)
  std::uint64_t lend_max_bytes = std::uint64_t{2} << 20;  // VGPUMEM_LEND_MAX_BYTES (vmm/pager.h)
  // VGPUMEM_PIECE_BYTES (vmm/pager.h); 0 = off. Unset: kDefaultPieceBytes
  // under auto, whose plans move part of a large buffer; off otherwise.
  std::uint64_t piece_bytes = 0;
  static constexpr std::uint64_t kDefaultPieceBytes = std::uint64_t{32} << 20;
  // VGPUMEM_BLOCK_BYTES (vmm/chunk_pool.h): the largest physical allocation
  // the pager makes; 0 = auto, a sixteenth of the cap.
  std::uint64_t block_bytes = 0;
  static constexpr std::uint64_t kMaxBlockBytes = std::uint64_t{64} << 20;
  // VGPUMEM_MOVER: whether the plan's moves are made by the pager's mover
  // thread (vmm/mover.h); off, on the program's thread that fires them.
  bool mover = true;
  CuptiUse cupti = CuptiUse::automatic;         // VGPUMEM_CUPTI
  VictimOrder victims = VictimOrder::automatic; // VGPUMEM_VICTIMS
  // VGPUMEM_LIBRARY_HOOKS: whether the cuBLAS/cuDNN hooks tell the pager and
  // the scheduler what a call does; off, they forward untouched.
  bool library_hooks = true;

  // VGPUMEM_LIMIT_<device> if set, else VGPUMEM_LIMIT.
  const MemoryLimit& limit_for(int device) const;
  bool any_limit() const;
};

// What was wrong: the variable, its value, and the forms it accepts.
struct ConfigError {
  enum class Kind { invalid_value, unknown_variable };
  std::string variable;
  std::string value;
  std::string accepted;
  Kind kind = Kind::invalid_value;
  std::string problem;  // optional: what exactly is wrong, e.g. "GB is ambiguous"
  std::string message() const;  // one line, suitable for stderr
};

struct ConfigResult {
  std::optional<Config> config;
  std::optional<ConfigError> error;
};

// Reads variables through `getenv_fn` and enumerates names through `names`
// (every NAME in NAME=VALUE of the environment) so VGPUMEM_LIMIT_<i> and
// misspelt VGPUMEM_* names are found. `pid` replaces %p in paths.
ConfigResult parse_config(const std::function<const char*(const char*)>& getenv_fn,
                          const std::vector<std::string>& names, int pid);

// The process environment, for parse_config.
ConfigResult parse_process_config();

// Individual parsers, exposed for tests and for the vgpumem command.
std::optional<MemoryLimit> parse_memory_limit(std::string_view text);
// As above; when refused, `problem` says what exactly is wrong if the
// accepted forms alone do not (e.g. "below 2 MiB ...; did you mean 50%?").
std::optional<MemoryLimit> parse_memory_limit(std::string_view text, std::string* problem);
std::optional<std::uint64_t> parse_byte_size(std::string_view text);  // no percent
std::optional<LogLevel> parse_log_level(std::string_view text);
std::string_view to_string(LogLevel level);
std::optional<Policy> parse_policy(std::string_view text);
std::string_view to_string(Policy policy);
std::optional<vmm::CheckMode> parse_check_mode(std::string_view text);
std::optional<CuptiUse> parse_cupti_use(std::string_view text);
std::string_view to_string(CuptiUse use);
std::optional<VictimOrder> parse_victim_order(std::string_view text);
std::string_view to_string(VictimOrder order);
// Whether `config` ranks victims by the learned step's next use.
bool orders_victims_by_next_use(const Config& config);
std::string_view to_string(vmm::CheckMode mode);
// Every VGPUMEM_* variable the shim reads, VGPUMEM_LIMIT_<i> written so.
const std::vector<std::string_view>& known_variables();
std::string expand_pid(std::string_view path, int pid);
// Why a trace could not be written to `path` (%p already expanded): its
// directory is missing, is not one, or takes no new file; or the path names
// a directory. Empty when it can be written. Checked before the program runs,
// so that a long run does not end without its trace.
std::string file_destination_problem(const std::string& path);
// Where the trace goes when `path` cannot be written at exit: `tmpdir` (or
// /tmp when it is null or empty), the same file name, then "." and the pid.
std::string fallback_trace_path(std::string_view path, int pid, const char* tmpdir);

}  // namespace vgpumem
