#pragma once
#include <string>
#include <vector>
namespace vgpumem::cli {
// `vgpumem report`: see cli/report.cpp.
int run_report(const std::vector<std::string>& args);
}  // namespace vgpumem::cli
