#include "cli/paths.h"

#include <unistd.h>

#include <climits>
#include <filesystem>

namespace vgpumem::cli {

std::string self_directory() {
  char buffer[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return ".";
  buffer[n] = '\0';
  return std::filesystem::path(buffer).parent_path().string();
}

namespace {
std::string prefix() { return std::filesystem::path(self_directory()).parent_path().string(); }
}  // namespace

std::string shim_path() { return prefix() + "/lib/libvgpumem.so"; }
std::string simulator_dir() { return prefix() + "/lib/sim"; }
std::string companion_program(const std::string& name) { return self_directory() + "/" + name; }

}  // namespace vgpumem::cli
