#include "shim/lifecycle.h"

#include <unistd.h>

#include <string>

// Note [Configuration at load time]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `lifecycle.cpp` parses and validates the configuration in a load-time
// constructor that only reads the environment: a malformed value stops the
// program before `main()` with one line naming the variable, the value and the
// accepted forms. It is the only constructor in the library (a test checks).

namespace vgpumem {
namespace {

// Writes without stdio or allocation-heavy machinery: we may be inside a
// constructor, before the program's main().
void write_stderr(const std::string& text) {
  const char* data = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, data, left);
    if (n <= 0) return;
    data += n;
    left -= static_cast<std::size_t>(n);
  }
}

Config load_or_stop() {
  ConfigResult result = parse_process_config();
  if (result.error) {
    write_stderr(result.error->message() + "\n");
    // _exit, not exit: the process has not started and nobody else's atexit
    // handlers should run on our behalf.
    ::_exit(2);
  }
  return std::move(*result.config);
}

// Validate at load so a bad value stops the program before main().
__attribute__((constructor)) void validate_configuration_at_load() { static_cast<void>(process_config()); }

}  // namespace

const Config& process_config() {
  static const Config config = load_or_stop();
  return config;
}

}  // namespace vgpumem
