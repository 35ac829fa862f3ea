// Logging through spdlog, quiet by default (warnings and errors only).
// Lines go to stderr or VGPUMEM_LOG_FILE, prefixed "[vgpumem pid]".
#pragma once

#include <spdlog/spdlog.h>

#include "shim/config.h"

namespace vgpumem {

// Sets up the process logger from the configuration. Safe to call more than
// once (the last call wins); before the first call the logger logs warnings
// and above to stderr.
void init_logging(const Config& config);

spdlog::logger& logger();

}  // namespace vgpumem

#define VGPUMEM_LOG_TRACE(...) ::vgpumem::logger().trace(__VA_ARGS__)
#define VGPUMEM_LOG_DEBUG(...) ::vgpumem::logger().debug(__VA_ARGS__)
#define VGPUMEM_LOG_INFO(...) ::vgpumem::logger().info(__VA_ARGS__)
#define VGPUMEM_LOG_WARN(...) ::vgpumem::logger().warn(__VA_ARGS__)
#define VGPUMEM_LOG_ERROR(...) ::vgpumem::logger().error(__VA_ARGS__)
