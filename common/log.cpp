#include "common/log.h"

#include <pthread.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

namespace vgpumem {
namespace {

constexpr const char* kPattern = "[vgpumem %P] %^%l%$: %v";

// stderr through write(2), under this sink's own mutex. spdlog's console
// sinks share one process-wide mutex, which a forked child could inherit
// locked; a child's logger (below) gets fresh sinks and so fresh mutexes.
class StderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    spdlog::memory_buf_t line;
    formatter_->format(message, line);
    const char* data = line.data();
    std::size_t left = line.size();
    while (left > 0) {
      const ssize_t n = ::write(STDERR_FILENO, data, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      data += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  void flush_() override {}
};

// The logger writes through one dist_sink whose children init_logging swaps
// under the dist_sink's own lock: callers keep a stable logger reference while
// the destination changes.
struct ProcessLogger {
  std::shared_ptr<spdlog::sinks::dist_sink_mt> destination = std::make_shared<spdlog::sinks::dist_sink_mt>();
  spdlog::logger logger{"vgpumem", destination};
  std::string file;  // the log file in use, empty for stderr

  ProcessLogger() {
    destination->set_sinks({stderr_sink()});
    logger.set_level(spdlog::level::warn);
    logger.flush_on(spdlog::level::warn);
  }

  static spdlog::sink_ptr stderr_sink() { return with_pattern(std::make_shared<StderrSink>()); }

  static spdlog::sink_ptr with_pattern(spdlog::sink_ptr sink) {
    sink->set_pattern(kPattern);
    return sink;
  }
};

// Never destroyed: threads of the program may still log while static
// destructors run at exit. Replaced (the old one leaked) in a forked child.
std::atomic<ProcessLogger*> g_logger{nullptr};

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

// In a child after fork(): only the forking thread exists, and another of the
// parent's threads may have been inside a sink, holding its mutex. The child
// logs through a new logger with new sinks (same destination and level); the
// parent's is abandoned, untouched.
void renew_logger_in_child() {
  ProcessLogger* parent = g_logger.load(std::memory_order_acquire);
  if (parent == nullptr) return;
  try {
    auto* child = new ProcessLogger;
    child->logger.set_level(parent->logger.level());
    if (!parent->file.empty()) {
      std::string why;
      if (spdlog::sink_ptr sink = open_file_sink(parent->file, why)) {
        child->destination->set_sinks({sink});
        child->file = parent->file;
      }
    }
    g_logger.store(child, std::memory_order_release);
  } catch (...) {
    // Out of memory in the child: keep the parent's logger.
  }
}

ProcessLogger& process_logger() {
  if (ProcessLogger* logger = g_logger.load(std::memory_order_acquire)) return *logger;
  static const bool created = [] {
    g_logger.store(new ProcessLogger, std::memory_order_release);
    pthread_atfork(nullptr, nullptr, &renew_logger_in_child);
    return true;
  }();
  static_cast<void>(created);
  return *g_logger.load(std::memory_order_acquire);
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

}  // namespace

void init_logging(LogLevel level, const std::string& file) {
  try {
    ProcessLogger& state = process_logger();
    std::string failed_file, why;
    spdlog::sink_ptr sink;
    if (!file.empty()) {
      sink = open_file_sink(file, why);
      if (!sink) failed_file = file;
    }
    state.destination->set_sinks({sink ? sink : ProcessLogger::stderr_sink()});
    state.file = sink ? file : std::string();
    state.logger.set_level(to_spdlog(level));
    if (!failed_file.empty()) {
      state.logger.warn("cannot open log file {}: {}; logging to stderr", failed_file, why);
    }
  } catch (...) {
    // Logging must never take the program down; keep whatever sink is in place.
  }
}

bool log_enabled(LogLevel level) noexcept {
  try {
    return process_logger().logger.should_log(to_spdlog(level));
  } catch (...) {
    return false;  // the logger could not be created (out of memory)
  }
}

void log_formatted(LogLevel level, fmt::string_view format, fmt::format_args args) noexcept {
  try {
    fmt::memory_buffer line;
    fmt::vformat_to(fmt::appender(line), format, args);
    process_logger().logger.log(to_spdlog(level), spdlog::string_view_t(line.data(), line.size()));
  } catch (...) {
    // Out of memory, or a sink that failed: the line is dropped, the program goes on.
  }
}

void write_stderr_line(const char* text) noexcept {
  std::size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace vgpumem
