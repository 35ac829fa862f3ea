#pragma once
#include <string>
#include <vector>
namespace vgpumem::cli {
// `vgpumem simulate`: see cli/simulate.cpp.
int run_simulate(const std::vector<std::string>& args);
}  // namespace vgpumem::cli
