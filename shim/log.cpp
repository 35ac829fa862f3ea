#include "shim/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

namespace vgpumem {
namespace {

constexpr const char* kPattern = "[vgpumem %P] %^%l%$: %v";

// The logger writes through one dist_sink whose children init_logging swaps
// under the dist_sink's own lock: callers keep a stable logger reference while
// the destination changes.
struct ProcessLogger {
  std::shared_ptr<spdlog::sinks::dist_sink_mt> destination = std::make_shared<spdlog::sinks::dist_sink_mt>();
  spdlog::logger logger{"vgpumem", destination};

  ProcessLogger() {
    destination->set_sinks({stderr_sink()});
    logger.set_level(spdlog::level::warn);
    logger.flush_on(spdlog::level::warn);
  }

  static spdlog::sink_ptr stderr_sink() { return with_pattern(std::make_shared<spdlog::sinks::stderr_color_sink_mt>()); }

  static spdlog::sink_ptr with_pattern(spdlog::sink_ptr sink) {
    sink->set_pattern(kPattern);
    return sink;
  }
};

ProcessLogger& process_logger() {
  // Never destroyed: threads of the program may still log while static
  // destructors run at exit.
  static ProcessLogger* const instance = new ProcessLogger;
  return *instance;
}

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::trace: return spdlog::level::trace;
    case LogLevel::debug: return spdlog::level::debug;
    case LogLevel::info: return spdlog::level::info;
    case LogLevel::warn: return spdlog::level::warn;
    case LogLevel::error: return spdlog::level::err;
    case LogLevel::critical: return spdlog::level::critical;
    case LogLevel::off: return spdlog::level::off;
  }
  return spdlog::level::warn;
}

// The file sink for `path` in append mode, or null with the reason in `why`.
spdlog::sink_ptr open_file_sink(const std::string& path, std::string& why) {
  try {
    return ProcessLogger::with_pattern(std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false));
  } catch (const spdlog::spdlog_ex& error) {
    const int saved_errno = errno;
    why = saved_errno != 0 ? std::strerror(saved_errno) : error.what();
    return nullptr;
  }
}

}  // namespace

void init_logging(const Config& config) {
  try {
    ProcessLogger& state = process_logger();
    std::string failed_file, why;
    spdlog::sink_ptr sink;
    if (!config.log_file.empty()) {
      sink = open_file_sink(config.log_file, why);
      if (!sink) failed_file = config.log_file;
    }
    state.destination->set_sinks({sink ? sink : ProcessLogger::stderr_sink()});
    state.logger.set_level(to_spdlog(config.log_level));
    if (!failed_file.empty()) {
      state.logger.warn("cannot open log file {}: {}; logging to stderr", failed_file, why);
    }
  } catch (...) {
    // Logging must never take the program down; keep whatever sink is in place.
  }
}

spdlog::logger& logger() { return process_logger().logger; }

}  // namespace vgpumem
