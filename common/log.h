// Logging (a leaf: vmm/, scheduler/ and the shim all log here), quiet by
// default (warnings and errors only). Lines go to stderr or VGPUMEM_LOG_FILE,
// prefixed "[vgpumem pid]". A child forked while another thread was logging
// logs through a fresh logger.
//
// spdlog does the writing, behind log.cpp alone: this header carries only
// fmt's light core (format strings checked at compile time, arguments type-
// erased), since spdlog's header-only build costs seconds of compile time in
// every file that includes it.
#pragma once

#include <fmt/core.h>

#include <string>

namespace vgpumem {

enum class LogLevel { trace, debug, info, warn, error, critical, off };

// Sets up the process logger: lines at `level` and above, to `file` (appended;
// empty: stderr). Safe to call more than once (the last call wins); before
// the first call the logger logs warnings and above to stderr.
void init_logging(LogLevel level, const std::string& file);

// Whether a line at `level` would be written now (one relaxed load).
bool log_enabled(LogLevel level) noexcept;

// Formats and writes one line. Never throws: a line that cannot be formatted
// or written is dropped.
void log_formatted(LogLevel level, fmt::string_view format, fmt::format_args args) noexcept;

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) noexcept {
  if (log_enabled(level)) log_formatted(level, format, fmt::make_format_args(args...));
}

// Writes `text` to stderr with write(2): no lock, no allocation. For the
// paths where logging itself may fail (out of memory).
void write_stderr_line(const char* text) noexcept;

}  // namespace vgpumem

#define VGPUMEM_LOG_TRACE(...) ::vgpumem::log(::vgpumem::LogLevel::trace, __VA_ARGS__)
#define VGPUMEM_LOG_DEBUG(...) ::vgpumem::log(::vgpumem::LogLevel::debug, __VA_ARGS__)
#define VGPUMEM_LOG_INFO(...) ::vgpumem::log(::vgpumem::LogLevel::info, __VA_ARGS__)
#define VGPUMEM_LOG_WARN(...) ::vgpumem::log(::vgpumem::LogLevel::warn, __VA_ARGS__)
#define VGPUMEM_LOG_ERROR(...) ::vgpumem::log(::vgpumem::LogLevel::error, __VA_ARGS__)
