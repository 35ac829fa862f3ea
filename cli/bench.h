#pragma once
#include <string>
#include <vector>
namespace vgpumem::cli {
// `vgpumem bench`: see cli/bench.cpp.
int run_bench(const std::vector<std::string>& args);
}  // namespace vgpumem::cli
