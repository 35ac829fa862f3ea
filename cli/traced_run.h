// `vgpumem run` with a trace asked for: the program runs as this command's
// child rather than in its place, so that when it is done the command can say
// whether the trace is where it was asked. A run that ends without it must
// not look like a success.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace vgpumem::cli {

// Runs `program` under `environment` and waits for it; its exit status is
// returned (a signal that killed it kills this process too). When no file
// `trace_pattern` names (%p: any process id) was written during the run, one
// line says so, and where the trace went instead if the shim wrote it to its
// fallback ($TMPDIR or /tmp); the status is then 1 unless the program's own
// already says it failed.
int run_traced(const std::vector<std::string>& program, const std::map<std::string, std::string>& environment,
               const std::string& trace_pattern);

}  // namespace vgpumem::cli
