#include "cli/paths.h"

#include <unistd.h>

#include <climits>
#include <filesystem>
#include <system_error>

#include "shim/config.h"

namespace vgpumem::cli {
namespace {

namespace fs = std::filesystem;

fs::path prefix() { return fs::path(self_directory()).parent_path(); }

fs::path library_dir() {
  if (in_build_tree()) return prefix() / "lib";
  // VGPUMEM_LIBDIR_FROM_BINDIR: CMAKE_INSTALL_LIBDIR relative to
  // CMAKE_INSTALL_BINDIR ("../lib"), baked in by cli/CMakeLists.txt.
  return (fs::path(self_directory()) / VGPUMEM_LIBDIR_FROM_BINDIR).lexically_normal();
}

// The installed tree's private directory: the demo's companions.
fs::path private_dir() { return library_dir() / "vgpumem"; }

}  // namespace

std::string self_directory() {
  char buffer[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return ".";
  buffer[n] = '\0';
  return fs::path(buffer).parent_path().string();
}

// A build tree has CMake's cache beside bin/; an install prefix never does.
bool in_build_tree() { return fs::exists(prefix() / "CMakeCache.txt"); }

std::string shim_path() { return (library_dir() / "libvgpumem.so").string(); }

std::string simulator_dir() { return (in_build_tree() ? library_dir() / "sim" : private_dir()).string(); }

std::string demo_trainer() { return workload_program("mlp_trainer"); }

std::string workload_program(const std::string& name) {
  return (in_build_tree() ? fs::path(self_directory()) / name : private_dir() / name).string();
}

std::string plot_script(const std::string& name) {
  // A build tree runs the source tree's script (VGPUMEM_SOURCE_DIR, baked in
  // by cli/CMakeLists.txt); an install has its own copy under <datadir>.
  if (in_build_tree()) return (fs::path(VGPUMEM_SOURCE_DIR) / "scripts" / name).string();
  return (fs::path(self_directory()) / VGPUMEM_DATADIR_FROM_BINDIR / "vgpumem" / name)
      .lexically_normal()
      .string();
}

std::string missing_companion_advice() {
  // Every companion ships with the command (target vgpumem_shipped,
  // cmake/Install.cmake), with or without the tests.
  if (in_build_tree()) return "build it with `cmake --build " + prefix().string() + " --target vgpumem_shipped`";
  return "this install is incomplete: install vgpumem again (docs/install.md)";
}

std::string make_output_directory(const std::string& command, const std::string& option, const std::string& dir) {
  const std::string invalid = "vgpumem " + command + ": invalid " + option + " \"" + dir + "\": ";
  std::error_code error;
  if (fs::exists(dir, error) && !fs::is_directory(dir, error)) return invalid + "it is a file, not a directory";
  fs::create_directories(dir, error);
  if (error) return invalid + "cannot create the directory: " + error.message();
  return {};
}

std::string output_file_problem(const std::string& command, const std::string& option, const std::string& path) {
  const std::string problem = file_destination_problem(path);
  if (problem.empty()) return {};
  return "vgpumem " + command + ": invalid " + option + " \"" + path + "\": " + problem;
}

}  // namespace vgpumem::cli
