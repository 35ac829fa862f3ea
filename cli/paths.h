// Where the command's companions live. Everything is found relative to the
// command itself (/proc/self/exe), so a build tree, an install prefix and the
// Python wheel all work wherever they landed:
//
//   installed (cmake --install, the wheel)    build tree
//   bin/vgpumem                               bin/vgpumem
//   <libdir>/libvgpumem.so                    lib/libvgpumem.so
//   <libdir>/vgpumem/libcuda.so.1             lib/sim/libcuda.so.1
//   <libdir>/vgpumem/mlp_trainer              bin/mlp_trainer
//   <datadir>/vgpumem/plot_timeline.py        <source>/scripts/plot_timeline.py
//   <datadir>/vgpumem/plot_trace.py           <source>/scripts/plot_trace.py
//
// <libdir> is CMake's CMAKE_INSTALL_LIBDIR (lib for any prefix but /usr on
// Debian), <datadir> its CMAKE_INSTALL_DATADIR (share). The simulated driver is never in <libdir> itself, where it could
// shadow the real libcuda.so.1.
#pragma once

#include <string>

namespace vgpumem::cli {

std::string self_directory();  // directory of /proc/self/exe
bool in_build_tree();          // the command runs from a CMake build tree
std::string shim_path();       // libvgpumem.so
std::string simulator_dir();   // the directory of the simulated libcuda.so.1
std::string demo_trainer();    // the demo's training program
std::string workload_program(const std::string& name);  // a simulated workload (mlp_trainer, layered_trainer)
std::string plot_script(const std::string& name);  // scripts/NAME (plot_timeline.py, plot_trace.py), as built or installed
// What to do when one of the companions above is missing, for a message
// that ends "... is missing; " + this: in a build tree the target that builds
// them all, in an install that it is incomplete.
std::string missing_companion_advice();

// Makes `dir` and its parents for a command's output (`vgpumem COMMAND
// OPTION DIR`); empty, or one line saying why it cannot be, e.g.
// `vgpumem demo: invalid --out "x": it is a file, not a directory`.
std::string make_output_directory(const std::string& command, const std::string& option, const std::string& dir);
// Empty when a file can be written at `path` before the command's work
// starts, or one line saying why not (its directory missing, read-only, or
// `path` a directory), so a long run does not end in a write that fails.
std::string output_file_problem(const std::string& command, const std::string& option, const std::string& path);

}  // namespace vgpumem::cli
