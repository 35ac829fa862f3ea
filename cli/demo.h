#pragma once
#include <string>
#include <vector>
namespace vgpumem::cli {
// `vgpumem demo`: see cli/demo.cpp.
int run_demo(const std::vector<std::string>& args);
}  // namespace vgpumem::cli
