#include "cli/trace_argument.h"

#include <fstream>
#include <iostream>

namespace vgpumem::cli {

bool take_trace_argument(const char* command, const std::string& arg, const char* usage, std::string* trace,
                         std::string* error) {
  const std::string name = std::string("vgpumem ") + command;
  if (!arg.empty() && arg[0] == '-') {
    *error = name + ": unknown option \"" + arg + "\"\n" + usage;
    return false;
  }
  if (!trace->empty()) {
    *error = name + ": one trace at a time (got \"" + *trace + "\" and \"" + arg + "\")";
    return false;
  }
  *trace = arg;
  return true;
}

std::optional<nlohmann::json> read_json_file(const char* command, const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "vgpumem " << command << ": cannot read \"" << path << "\"\n";
    return std::nullopt;
  }
  nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
  if (json.is_discarded()) {
    std::cerr << "vgpumem " << command << ": \"" << path << "\" is not JSON\n";
    return std::nullopt;
  }
  return json;
}

bool trace_given(const char* command, const std::string& trace, const char* usage, std::string* error) {
  if (!trace.empty()) return true;
  *error = std::string("vgpumem ") + command + ": which TRACE?\n" + usage;
  return false;
}

}  // namespace vgpumem::cli
