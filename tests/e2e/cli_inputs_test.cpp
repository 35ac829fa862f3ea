// Every `vgpumem` command that reads or writes a file, given what a user can
// hand it by mistake -- a directory, a device, a FIFO nobody writes to, a
// missing or empty file, a trace cut short, a trace with hostile values --
// ends with a status and one line saying what is wrong, never by a signal
// (an uncaught exception is SIGABRT) and never by hanging.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

namespace fs = std::filesystem;

// Longer than any command takes on a sane input, short enough to find a hang.
constexpr const char* kTimeoutSeconds = "20";

struct Input {
  std::string name;  // what it is, for the failure message
  std::string path;
};

std::string fuzz_path(const std::string& name) { return temp_path("cli-inputs-" + name); }

Input write_input(const std::string& name, const std::string& text) {
  const std::string path = fuzz_path(name + ".json");
  std::ofstream(path, std::ios::binary) << text;
  return {name, path};
}

// A real trace of a paged run whose schedule locked: summary, profile, plan.
const std::string& real_trace_text() {
  static const std::string text = [] {
    // Batch 8: the host computes the simulated kernels, and under the
    // sanitizers the default batch of 64 took a minute.
    const PagedRun run = run_paged("cli-inputs", {program("mlp_trainer"), "--layers", "8", "--width", "1024",
                                                  "--batch", "8", "--steps", "10"},
                                   "28MiB", {{"VGPUMEM_POLICY", "auto"}});
    EXPECT_EQ(run.process.exit_code, 0) << run.process.out << run.process.err;
    EXPECT_TRUE(run.trace.contains("vgpumem")) << "no trace";
    const nlohmann::json schedule = run.trace.value("vgpumem", nlohmann::json::object()).value("schedule", nlohmann::json());
    EXPECT_TRUE(schedule.is_object() && schedule.contains("profile") && schedule.contains("plan"))
        << "the run's schedule locked and planned: " << schedule.dump().substr(0, 500);
    return run.trace.dump();
  }();
  return text;
}

// Runs `vgpumem ARGS...` under a timeout; checks it ended by itself, without
// a signal, and with one line on stderr when it failed.
void expect_orderly_end(const std::vector<std::string>& args, const std::string& what) {
  std::vector<std::string> argv{"/usr/bin/timeout", "-s", "KILL", kTimeoutSeconds, VGPUMEM_TEST_CLI};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult result = run_process(argv, simulator_environment());
  std::string command = "vgpumem";
  for (const std::string& arg : args) command += " " + (arg.size() > 80 ? arg.substr(0, 80) + "..." : arg);
  const std::string context = what + ": " + command + "\n" + result.err.substr(0, 2000);
  EXPECT_EQ(result.signal, 0) << context;
  ASSERT_NE(result.exit_code, 137) << "killed after " << kTimeoutSeconds << " s: " << context;
  EXPECT_NE(result.exit_code, 134) << context;
  EXPECT_NE(result.exit_code, 139) << context;
  if (result.exit_code != 0) {
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << "one error line: " << context;
    EXPECT_EQ(result.err.rfind("vgpumem ", 0), 0u) << context;
  }
}

// The commands that read a trace, each way it can be asked.
constexpr std::size_t kReaders = 3;

void expect_reader_copes(std::size_t reader, const Input& input) {
  switch (reader % kReaders) {
    case 0: expect_orderly_end({"report", input.path}, input.name); break;
    case 1: expect_orderly_end({"simulate", input.path}, input.name); break;
    default:
      expect_orderly_end({"simulate", input.path, "--limit", "50%", "--policy", "all", "--json"}, input.name);
  }
}

void expect_every_reader_copes(const Input& input) {
  for (std::size_t reader = 0; reader < kReaders; ++reader) expect_reader_copes(reader, input);
}

// For the long series of damaged traces (hundreds of inputs, a process each
// under the sanitizers): the n-th input goes to one reader, in a rotation
// that shifts once per `period` inputs, so that across the series every
// reader meets every kind of damage the series cycles through with that
// period. All three readers parse the whole trace first.
std::size_t reader_for(std::size_t n, std::size_t period) { return n + n / period; }

TEST(CommandInputs, PathsThatAreNotTraceFiles) {
  const std::string fifo = fuzz_path("fifo");
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<Input> inputs{{"a directory", VGPUMEM_TEST_TMP_DIR},
                                  {"the current directory", "."},
                                  {"/dev/null", "/dev/null"},
                                  {"a FIFO no one writes to", fifo},
                                  {"a missing file", fuzz_path("missing/trace.json")},
                                  write_input("empty", "")};
  for (const Input& input : inputs) expect_every_reader_copes(input);
  fs::remove(fifo);
}

TEST(CommandInputs, TruncatedTraces) {
  const std::string& text = real_trace_text();
  ASSERT_GT(text.size(), 1000u);
  std::vector<std::size_t> cuts{1, 2, 10, 100};
  for (std::size_t i = 1; i < 32; ++i) cuts.push_back(text.size() * i / 32);
  cuts.push_back(text.size() - 1);
  for (std::size_t n = 0; n < cuts.size(); ++n) {
    const Input input = write_input("cut-at-" + std::to_string(cuts[n]), text.substr(0, cuts[n]));
    // The shortest and the whole-but-one cuts meet every reader, the rest one each.
    if (n < 4 || n + 1 == cuts.size()) {
      expect_every_reader_copes(input);
    } else {
      expect_reader_copes(n, input);
    }
  }
}

TEST(CommandInputs, HostileJson) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string megabyte(1 << 20, 'x');
  const std::vector<std::pair<std::string, std::string>> texts{
      {"deeply nested arrays", deep},
      {"deeply nested summary", R"({"vgpumem": )" + deep + "}"},
      {"a 1 MB string", R"({"vgpumem": ")" + megabyte + R"("})"},
      {"a 1 MB kernel name",
       R"({"format": 1, "units": [4194304], "ops": [[1000, 0, 1, [0], 0]], "names": [")" + megabyte + R"("]})"},
      {"null", "null"},
      {"a number", "42"},
      {"an array", "[]"},
      {"an empty object", "{}"},
      {"a summary of no keys", R"({"vgpumem": {}})"},
      {"a summary of the wrong type", R"({"vgpumem": [1, 2]})"},
      {"NaN", R"({"vgpumem": NaN})"},
      {"Infinity", R"({"vgpumem": {"devices": [{"cap": Infinity}]}})"},
      {"1e999", R"({"format": 1, "units": [4194304], "ops": [[1e999, 0, 1, [0]]]})"},
      {"invalid UTF-8", "{\"vgpumem\": \"\xff\xfe\"}"},
      {"negative unit", R"({"format": 1, "units": [-4194304], "ops": [[1000, 0, 1, [0]]]})"},
      {"huge unit", R"({"format": 1, "units": [18446744073709551615], "ops": [[1000, 0, 1, [0]]]})"},
      {"huge duration", R"({"format": 1, "units": [4194304], "ops": [[1e308, 1e308, 1, [0]]]})"},
      {"negative budget",
       R"({"vgpumem": {"schedule": {"profile": {"format": 1, "units": [4194304], "ops": [[1000, 0, 1, [0]]]},
                                    "plan": {"budget": -1, "link_to_host_gbps": "fast"}}}})"},
      {"a string budget",
       R"({"vgpumem": {"schedule": {"profile": {"format": 1, "units": [4194304], "ops": [[1000, 0, 1, [0]]]},
                                    "plan": {"budget": "lots"}}}})"},
      {"wrong types everywhere",
       R"({"traceEvents": "none", "vgpumem": {"devices": [{"cap": "x", "peak": -5}], "paging": {"devices": "no",
           "victims": [], "mover": 7}, "schedule": {"locked": "yes", "plan": [], "trial": {"candidates": 3}},
           "library_calls": [1]}})"},
      {"events of the wrong shape", R"({"traceEvents": [1, "x", {"ts": "now"}, {"ts": -1e308}], "vgpumem": {}})"},
  };
  for (const auto& [name, text] : texts) {
    const Input written = write_input("hostile", text);
    expect_every_reader_copes({name, written.path});
  }
}

// A hostile value for the n-th place: wrong types, huge and negative numbers.
constexpr std::size_t kHostileValues = 12;

nlohmann::json hostile_value(std::size_t n) {
  static const std::array<nlohmann::json, kHostileValues> values{
      "a string", -1, std::numeric_limits<std::uint64_t>::max(), 1e308, -1e308, 0.5, nullptr, true,
      nlohmann::json::array(), nlohmann::json::object(), nlohmann::json::array({-1, "x", nullptr}),
      std::numeric_limits<std::int64_t>::min()};
  return values[n % kHostileValues];
}

// Every place in `json` (arrays: their first two elements), by JSON pointer.
void collect_places(const nlohmann::json& json, const std::string& at, std::vector<std::string>* places) {
  places->push_back(at);
  if (json.is_object()) {
    for (const auto& [key, value] : json.items()) collect_places(value, at + "/" + key, places);
  } else if (json.is_array()) {
    for (std::size_t i = 0; i < std::min<std::size_t>(json.size(), 2); ++i) {
      collect_places(json[i], at + "/" + std::to_string(i), places);
    }
  }
}

// The real trace with one value at a time made hostile, or its key removed.
TEST(CommandInputs, RealTraceWithOneValueWrong) {
  nlohmann::json trace = nlohmann::json::parse(real_trace_text());
  ASSERT_TRUE(trace.contains("traceEvents"));
  trace["traceEvents"].erase(trace["traceEvents"].begin() + std::min<std::ptrdiff_t>(20, trace["traceEvents"].size()),
                             trace["traceEvents"].end());
  std::vector<std::string> places;
  collect_places(trace["vgpumem"], "/vgpumem", &places);
  ASSERT_GT(places.size(), 50u);
  for (std::size_t n = 0; n < places.size(); ++n) {
    nlohmann::json changed = trace;
    const std::size_t slash = places[n].rfind('/');
    nlohmann::json& parent = changed[nlohmann::json::json_pointer(places[n].substr(0, slash))];
    const bool remove = n % 5 == 4 && parent.is_object();
    if (remove) {
      parent.erase(places[n].substr(slash + 1));
    } else {
      changed[nlohmann::json::json_pointer(places[n])] = hostile_value(n);
    }
    const Input input =
        write_input("one-wrong", changed.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    expect_reader_copes(reader_for(n, kHostileValues),
                        {places[n] + (remove ? " removed" : " = " + hostile_value(n).dump()), input.path});
  }
}

// Where the commands write: a directory that cannot be made, a file where a
// directory is wanted.
TEST(CommandInputs, OutputPathsThatCannotBeWritten) {
  const Input file = write_input("a-summary", R"({"traceEvents": [], "vgpumem": {"version": 1}})");
  for (const std::string& dir : {std::string("/proc/vgpumem-test"), file.path}) {
    expect_orderly_end({"demo", "--out", dir}, "demo --out");
    expect_orderly_end({"bench", "--out", dir, "--models", "gpt2-medium", "--caps", "50", "--policies", "auto"},
                       "bench --out");
    expect_orderly_end({"bench", "--markdown", dir + "/table.md", "--models", "gpt2-medium", "--caps", "50",
                        "--policies", "auto"},
                       "bench --markdown");
    expect_orderly_end({"report", file.path, "--png", dir + "/run.png"}, "report --png");
  }
}

}  // namespace
}  // namespace vgpumem::test
