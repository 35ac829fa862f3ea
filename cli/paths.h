// Where the command's companions live: the layout of the build tree and of an
// install is the same (bin/vgpumem, lib/libvgpumem.so, lib/sim/libcuda.so.1),
// so everything is found relative to the command itself.
#pragma once

#include <string>

namespace vgpumem::cli {

std::string self_directory();  // directory of /proc/self/exe
std::string shim_path();       // <prefix>/lib/libvgpumem.so
std::string simulator_dir();   // <prefix>/lib/sim
std::string companion_program(const std::string& name);  // <prefix>/bin/<name>

}  // namespace vgpumem::cli
