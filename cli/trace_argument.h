// The one positional argument of `vgpumem simulate` and `vgpumem report`:
// the trace to read, and reading it.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace vgpumem::cli {

// `arg` (anything not a known option) as the trace; false, with `error`
// saying why, for what looks like an option or a second trace.
bool take_trace_argument(const char* command, const std::string& arg, const char* usage, std::string* trace,
                         std::string* error);
// False, with `error` naming the usage, when no trace was given.
bool trace_given(const char* command, const std::string& trace, const char* usage, std::string* error);
// The JSON in the file at `path`; nothing, having said why on standard
// error, if it cannot be read or is not JSON.
std::optional<nlohmann::json> read_json_file(const char* command, const std::string& path);

}  // namespace vgpumem::cli
