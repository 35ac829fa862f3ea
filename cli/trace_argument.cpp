#include "cli/trace_argument.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

namespace vgpumem::cli {

bool take_trace_argument(const char* command, const std::string& arg, const char* usage, std::string* trace,
                         std::string* error) {
  const std::string name = std::string("vgpumem ") + command;
  if (!arg.empty() && arg[0] == '-') {
    *error = name + ": unknown option \"" + arg + "\"\n" + usage;
    return false;
  }
  if (!trace->empty()) {
    *error = name + ": one trace at a time (got \"" + *trace + "\" and \"" + arg + "\")";
    return false;
  }
  *trace = arg;
  return true;
}

namespace {

// The whole file, or nullopt with `error` set. Opened without blocking, so a
// FIFO no one writes to reads as empty instead of hanging; a pipe that has a
// writer (`<(zcat trace.json.gz)`) is read to its end.
std::optional<std::string> read_whole_file(const std::string& path, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *error = std::strerror(errno);
    return std::nullopt;
  }
  struct stat status {};
  if (::fstat(fd, &status) == 0 && S_ISDIR(status.st_mode)) {
    ::close(fd);
    *error = "it is a directory, not a trace file";
    return std::nullopt;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      text.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      *error = std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
  }
  ::close(fd);
  return text;
}

// nlohmann's message without its "[json.exception.parse_error.101] " tag.
std::string parse_problem(const nlohmann::json::exception& exception) {
  const std::string what = exception.what();
  const std::size_t tag_end = what.find("] ");
  return tag_end == std::string::npos ? what : what.substr(tag_end + 2);
}

}  // namespace

std::optional<nlohmann::json> read_json_file(const char* command, const std::string& path) {
  std::string error;
  const std::optional<std::string> text = read_whole_file(path, &error);
  if (!text) {
    std::cerr << "vgpumem " << command << ": cannot read \"" << path << "\": " << error << "\n";
    return std::nullopt;
  }
  if (text->empty()) {
    std::cerr << "vgpumem " << command << ": \"" << path << "\" is not JSON: it is empty\n";
    return std::nullopt;
  }
  try {
    return nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception& exception) {
    // A trace cut short (a run killed while writing, a copy not finished) says "unexpected end of input".
    std::cerr << "vgpumem " << command << ": \"" << path << "\" is not JSON: " << parse_problem(exception) << "\n";
    return std::nullopt;
  }
}

bool trace_given(const char* command, const std::string& trace, const char* usage, std::string* error) {
  if (!trace.empty()) return true;
  *error = std::string("vgpumem ") + command + ": which TRACE?\n" + usage;
  return false;
}

}  // namespace vgpumem::cli
