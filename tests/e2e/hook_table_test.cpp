// Hooks that cannot forget: every entry point of the hooked set is counted,
// once a call, and shows in the trace's calls_by_api, with no line of its
// own doing it (the boundary VGPUMEM_HOOK_DEFINE wraps every body in counts,
// interpose/hook_support.h). A hook added by the recipe at the top of that
// header is in hooked_functions.def, so this test calls it too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "process.h"

namespace vgpumem::test {
namespace {

const std::vector<std::string>& hooked_symbols() {
  static const std::vector<std::string> symbols = {
#define VGPUMEM_HOOK(symbol, pfn, base, version, flavour) #symbol,
#include "interpose/hooked_functions.def"
#undef VGPUMEM_HOOK
  };
  return symbols;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The probe calls each hooked symbol once, through the shim, over the
// simulated driver; the trace written at exit counts every one exactly once.
TEST(HookTable, EveryHookIsCountedOnceACallAndTraced) {
  const std::string trace_path = temp_path("every_hook_trace.json");
  std::filesystem::remove(trace_path);
  auto env = shim_environment();
  env["VGPUMEM_TRACE"] = trace_path;
  const ProcessResult run = run_process({program("every_hook_probe")}, env);
  ASSERT_EQ(run.signal, 0) << run.out << run.err;
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(field(run.out, "every"), "hook called " + std::to_string(hooked_symbols().size()) + " missing 0")
      << run.out;

  const nlohmann::json trace = nlohmann::json::parse(read_text(trace_path));
  const nlohmann::json& calls = trace["vgpumem"]["calls_by_api"];
  std::string wrong;
  for (const std::string& symbol : hooked_symbols()) {
    const int n = calls.value(symbol, 0);
    if (n != 1) wrong += "\n  " + symbol + ": " + std::to_string(n);
  }
  EXPECT_TRUE(wrong.empty()) << "calls_by_api should count each hook called once:" << wrong;
  EXPECT_EQ(calls.size(), hooked_symbols().size()) << calls.dump();
}

// No hook counts its own calls: only the boundary does (count_call), so a
// body can never forget it, nor count twice.
TEST(HookTable, NoHookBodyCountsItsCalls) {
  const std::filesystem::path interpose = std::filesystem::path(VGPUMEM_TEST_SOURCE_DIR) / "interpose";
  std::string counting;
  for (const auto& entry : std::filesystem::directory_iterator(interpose)) {
    const std::string name = entry.path().filename().string();
    // The boundary, the counter, and the platform that zeroes it after a fork.
    if (name == "hook_support.h" || name == "hook_table.h" || name == "runtime_platform.cpp") continue;
    const std::string text = read_text(entry.path().string());
    for (const char* call : {"count_call(", "count(HookId::", ".count(id)", "g_hook_calls["}) {
      if (text.find(call) != std::string::npos) counting += "\n  " + name + ": " + call;
    }
  }
  EXPECT_TRUE(counting.empty()) << "a hook counts by hand:" << counting;
}

}  // namespace
}  // namespace vgpumem::test
