#pragma once
#include <string>
#include <vector>
namespace vgpumem::cli {
// `vgpumem doctor`: see cli/doctor.cpp.
int run_doctor(const std::vector<std::string>& args);
}  // namespace vgpumem::cli
