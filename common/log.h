// Logging through spdlog (a leaf: vmm/, scheduler/ and the shim all log here), quiet by default (warnings and errors only).
// Lines go to stderr or VGPUMEM_LOG_FILE, prefixed "[vgpumem pid]". A child
// forked while another thread was logging logs through a fresh logger.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace vgpumem {

enum class LogLevel { trace, debug, info, warn, error, critical, off };

// Sets up the process logger: lines at `level` and above, to `file` (appended;
// empty: stderr). Safe to call more than once (the last call wins); before
// the first call the logger logs warnings and above to stderr.
void init_logging(LogLevel level, const std::string& file);

spdlog::logger& logger();

// Writes `text` to stderr with write(2): no lock, no allocation. For the
// paths where logging itself may fail (out of memory).
void write_stderr_line(const char* text) noexcept;

}  // namespace vgpumem

#define VGPUMEM_LOG_TRACE(...) ::vgpumem::logger().trace(__VA_ARGS__)
#define VGPUMEM_LOG_DEBUG(...) ::vgpumem::logger().debug(__VA_ARGS__)
#define VGPUMEM_LOG_INFO(...) ::vgpumem::logger().info(__VA_ARGS__)
#define VGPUMEM_LOG_WARN(...) ::vgpumem::logger().warn(__VA_ARGS__)
#define VGPUMEM_LOG_ERROR(...) ::vgpumem::logger().error(__VA_ARGS__)
