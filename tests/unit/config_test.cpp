#include "common/format_bytes.h"
#include "shim/config.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace vgpumem {
namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;
constexpr std::uint64_t GiB = 1024 * MiB;
constexpr std::uint64_t TiB = 1024 * GiB;

// An environment for parse_config, independent of the test process's own.
ConfigResult parse(const std::map<std::string, std::string>& env, int pid = 4242) {
  std::vector<std::string> names;
  for (const auto& [name, value] : env) names.push_back(name);
  const auto lookup = [&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  return parse_config(lookup, names, pid);
}

Config parse_ok(const std::map<std::string, std::string>& env) {
  ConfigResult result = parse(env);
  EXPECT_FALSE(result.error) << result.error->message();
  return result.config.value_or(Config{});
}

ConfigError parse_error(const std::map<std::string, std::string>& env) {
  ConfigResult result = parse(env);
  EXPECT_FALSE(result.config);
  return result.error.value_or(ConfigError{});
}

// --- sizes -------------------------------------------------------------------

TEST(ByteSize, AcceptsEveryUnitSpelling) {
  const std::pair<const char*, std::uint64_t> cases[] = {
      {"512", 512},         {"512B", 512},       {"0", 0},             {"1K", KiB},        {"1k", KiB},
      {"1Ki", KiB},         {"1KiB", KiB},       {"512M", 512 * MiB},  {"2m", 2 * MiB},    {"3Mi", 3 * MiB},
      {"4MiB", 4 * MiB},    {"8G", 8 * GiB},     {"8g", 8 * GiB},      {"8Gi", 8 * GiB},   {"8GiB", 8 * GiB},
      {"2T", 2 * TiB},      {"2t", 2 * TiB},     {"2Ti", 2 * TiB},     {"2TiB", 2 * TiB},  {"1.5GiB", GiB + GiB / 2},
      {"0.5K", 512},        {"1.1K", 1126},  // 1126.4 rounds down to whole bytes
  };
  for (const auto& [text, bytes] : cases) EXPECT_EQ(parse_byte_size(text), bytes) << text;
}

TEST(ByteSize, RejectsAmbiguousOrSloppyForms) {
  for (const char* text : {"", "8GB", "8gb", "8KB", "8GB1", "-3G", "+3G", "0x10", "010", "00", "1e9", " 8G", "8G ",
                           "8 G", "1.5", "1.5B", "1.", ".5G", "G", "8GiBs", "8Gib", "8kib", "50%", "1,5G"}) {
    EXPECT_FALSE(parse_byte_size(text)) << '"' << text << '"';
  }
}

TEST(ByteSize, RejectsOverflowPastTwoToThe64) {
  EXPECT_EQ(parse_byte_size("18446744073709551615"), std::numeric_limits<std::uint64_t>::max());
  EXPECT_FALSE(parse_byte_size("18446744073709551616"));
  EXPECT_EQ(parse_byte_size("16777215T"), 16777215 * TiB);
  EXPECT_FALSE(parse_byte_size("16777216T"));  // exactly 2^64
  EXPECT_FALSE(parse_byte_size("16777216.0T"));
}

TEST(MemoryLimit, ParsesBytesAndPercentages) {
  const std::optional<MemoryLimit> bytes = parse_memory_limit("8GiB");
  ASSERT_TRUE(bytes);
  EXPECT_EQ(bytes->kind, MemoryLimit::Kind::bytes);
  EXPECT_EQ(bytes->bytes, 8 * GiB);

  const std::optional<MemoryLimit> percent = parse_memory_limit("12.5%");
  ASSERT_TRUE(percent);
  EXPECT_EQ(percent->kind, MemoryLimit::Kind::percent);
  EXPECT_DOUBLE_EQ(percent->percent, 12.5);
  EXPECT_TRUE(parse_memory_limit("100%"));
}

TEST(MemoryLimit, RejectsZeroAndOutOfRangePercentages) {
  for (const char* text : {"0", "0G", "0.0000001K", "0%", "0.0%", "150%", "100.01%", "-5%", "%", "50 %", "050%", "1e2%"}) {
    EXPECT_FALSE(parse_memory_limit(text)) << text;
  }
}

TEST(MemoryLimit, Resolves) {
  EXPECT_EQ(MemoryLimit{}.resolve(80 * GiB), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ((MemoryLimit{MemoryLimit::Kind::bytes, 8 * GiB, 0}.resolve(80 * GiB)), 8 * GiB);
  EXPECT_EQ((MemoryLimit{MemoryLimit::Kind::percent, 0, 50}.resolve(80 * GiB)), 40 * GiB);
  EXPECT_EQ((MemoryLimit{MemoryLimit::Kind::percent, 0, 100}.resolve(1001)), 1001u);
  EXPECT_EQ((MemoryLimit{MemoryLimit::Kind::percent, 0, 50}.resolve(1001)), 500u);  // floor
}

TEST(FormatBytes, UsesBinaryUnitsWithTwoDecimals) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(KiB), "1.00 KiB");
  EXPECT_EQ(format_bytes(GiB + GiB / 2), "1.50 GiB");
  EXPECT_EQ(format_bytes(3 * TiB), "3.00 TiB");
  EXPECT_EQ(format_bytes(std::numeric_limits<std::uint64_t>::max()), "16.00 EiB");
}

// --- other values -------------------------------------------------------------

TEST(LogLevel, ParsesCaseInsensitively) {
  EXPECT_EQ(parse_log_level("trace"), LogLevel::trace);
  EXPECT_EQ(parse_log_level("DEBUG"), LogLevel::debug);
  EXPECT_EQ(parse_log_level("Info"), LogLevel::info);
  EXPECT_EQ(parse_log_level("warn"), LogLevel::warn);
  EXPECT_EQ(parse_log_level("Warning"), LogLevel::warn);
  EXPECT_EQ(parse_log_level("error"), LogLevel::error);
  EXPECT_EQ(parse_log_level("critical"), LogLevel::critical);
  EXPECT_EQ(parse_log_level("OFF"), LogLevel::off);
  EXPECT_FALSE(parse_log_level("loud"));
  EXPECT_FALSE(parse_log_level(""));
  EXPECT_FALSE(parse_log_level("warn "));
  for (LogLevel level : {LogLevel::trace, LogLevel::error, LogLevel::off}) EXPECT_EQ(parse_log_level(to_string(level)), level);
}

TEST(Policy, ParsesKnownNames) {
  EXPECT_EQ(parse_policy("off"), Policy::off);
  EXPECT_EQ(parse_policy("LRU"), Policy::lru);
  EXPECT_FALSE(parse_policy("fastest"));
  EXPECT_EQ(to_string(Policy::lru), "lru");
  EXPECT_EQ(parse_policy("auto"), Policy::automatic);
  EXPECT_EQ(parse_policy("Auto"), Policy::automatic);
  EXPECT_EQ(to_string(Policy::automatic), "auto");
}

TEST(ExpandPid, ReplacesPercentPAndPercentPercent) {
  EXPECT_EQ(expand_pid("/tmp/trace-%p.json", 77), "/tmp/trace-77.json");
  EXPECT_EQ(expand_pid("%p-%p", 5), "5-5");
  EXPECT_EQ(expand_pid("100%%-%p", 5), "100%-5");
  EXPECT_EQ(expand_pid("%%p", 5), "%p");
  EXPECT_EQ(expand_pid("odd%x%", 5), "odd%x%");
}

// --- the environment as a whole ----------------------------------------------

TEST(ParseConfig, DefaultsWithAnEmptyEnvironment) {
  const Config config = parse_ok({});
  EXPECT_FALSE(config.limit_all.is_set());
  EXPECT_TRUE(config.limit_device.empty());
  EXPECT_FALSE(config.any_limit());
  EXPECT_EQ(config.log_level, LogLevel::warn);
  EXPECT_EQ(config.log_file, "");
  EXPECT_EQ(config.trace_path, "");
  EXPECT_EQ(config.trace_max_events, 1'000'000u);
  EXPECT_EQ(config.driver_path, "libcuda.so.1");
  EXPECT_EQ(config.policy, Policy::off);
  EXPECT_FALSE(config.host_limit);
  EXPECT_EQ(config.grace_operations, 8u);
  EXPECT_EQ(config.grace, vmm::GraceKind::lend);
  EXPECT_EQ(config.lend_max_bytes, 2 * MiB);
  EXPECT_EQ(config.piece_bytes, 0u);
  EXPECT_EQ(config.cupti, CuptiUse::automatic);
  EXPECT_TRUE(config.library_hooks);
  EXPECT_TRUE(config.mover);
}

TEST(ParseConfig, ReadsEveryVariable) {
  const Config config = parse_ok({{"VGPUMEM_LIMIT", "8GiB"},
                                  {"VGPUMEM_LIMIT_1", "50%"},
                                  {"VGPUMEM_LIMIT_1023", "1G"},
                                  {"VGPUMEM_LOG_LEVEL", "debug"},
                                  {"VGPUMEM_LOG_FILE", "/tmp/log-%p"},
                                  {"VGPUMEM_TRACE", "/tmp/trace-%p.json"},
                                  {"VGPUMEM_TRACE_MAX_EVENTS", "5000"},
                                  {"VGPUMEM_DRIVER", "/opt/sim/libcuda.so.1"},
                                  {"VGPUMEM_POLICY", "off"},
                                  {"VGPUMEM_HOST_LIMIT", "64G"},
                                  {"VGPUMEM_GRACE_LAUNCHES", "0"},
                                  {"VGPUMEM_GRACE", "Blanket"},
                                  {"VGPUMEM_LEND_MAX_BYTES", "64KiB"},
                                  {"VGPUMEM_PIECE_BYTES", "6MiB"},
                                  {"VGPUMEM_CUPTI", "off"},
                                  {"VGPUMEM_VICTIMS", "Next-Use"},
                                  {"VGPUMEM_LIBRARY_HOOKS", "OFF"},
                                  {"VGPUMEM_MOVER", "Off"}});
  EXPECT_EQ(config.limit_all.bytes, 8 * GiB);
  EXPECT_EQ(config.limit_for(0).bytes, 8 * GiB);
  EXPECT_EQ(config.limit_for(1).kind, MemoryLimit::Kind::percent);
  EXPECT_EQ(config.limit_for(1023).bytes, GiB);
  EXPECT_EQ(config.log_level, LogLevel::debug);
  EXPECT_EQ(config.log_file, "/tmp/log-4242");
  EXPECT_EQ(config.trace_path, "/tmp/trace-4242.json");
  EXPECT_EQ(config.trace_path_pattern, "/tmp/trace-%p.json");
  EXPECT_EQ(config.trace_max_events, 5000u);
  EXPECT_EQ(config.driver_path, "/opt/sim/libcuda.so.1");
  EXPECT_EQ(config.policy, Policy::off);  // given explicitly, despite the caps
  EXPECT_EQ(config.host_limit, 64 * GiB);
  EXPECT_EQ(config.grace_operations, 0u);
  EXPECT_EQ(config.grace, vmm::GraceKind::blanket);
  EXPECT_EQ(config.lend_max_bytes, 64 * KiB);
  EXPECT_EQ(config.piece_bytes, 6 * MiB);
  EXPECT_EQ(config.cupti, CuptiUse::off);
  EXPECT_EQ(config.victims, VictimOrder::next_use);
  EXPECT_FALSE(config.mover);
  EXPECT_FALSE(config.library_hooks);
}

// Pieces by default under auto alone (whose plans can move part of a large
// buffer), of 32 MiB; off under the other policies; as given when given.
TEST(ParseConfig, PiecesByDefaultOnlyUnderAuto) {
  const auto pieces = [](std::map<std::string, std::string> env) { return parse_ok(env).piece_bytes; };
  EXPECT_EQ(pieces({{"VGPUMEM_LIMIT", "1G"}}), 32 * MiB) << "auto, the default with a cap";
  EXPECT_EQ(pieces({{"VGPUMEM_LIMIT", "1G"}, {"VGPUMEM_POLICY", "auto"}}), 32 * MiB);
  EXPECT_EQ(pieces({{"VGPUMEM_LIMIT", "1G"}, {"VGPUMEM_POLICY", "lru"}}), 0u);
  EXPECT_EQ(pieces({{"VGPUMEM_LIMIT", "1G"}, {"VGPUMEM_POLICY", "vdnn-all"}}), 0u);
  EXPECT_EQ(pieces({}), 0u) << "no cap, no paging";
  EXPECT_EQ(pieces({{"VGPUMEM_LIMIT", "1G"}, {"VGPUMEM_PIECE_BYTES", "off"}}), 0u);
  EXPECT_EQ(pieces({{"VGPUMEM_LIMIT", "1G"}, {"VGPUMEM_PIECE_BYTES", "8M"}}), 8 * MiB);
  EXPECT_EQ(pieces({{"VGPUMEM_LIMIT", "1G"}, {"VGPUMEM_POLICY", "lru"}, {"VGPUMEM_PIECE_BYTES", "4MiB"}}), 4 * MiB);
}

// Blocks automatic (0) unless given, as a whole number of chunks up to 64 MiB.
TEST(ParseConfig, BlockBytesAutomaticUnlessGiven) {
  const auto blocks = [](std::map<std::string, std::string> env) { return parse_ok(env).block_bytes; };
  EXPECT_EQ(blocks({{"VGPUMEM_LIMIT", "1G"}}), 0u);
  EXPECT_EQ(blocks({{"VGPUMEM_LIMIT", "1G"}, {"VGPUMEM_BLOCK_BYTES", "AUTO"}}), 0u);
  EXPECT_EQ(blocks({{"VGPUMEM_LIMIT", "1G"}, {"VGPUMEM_BLOCK_BYTES", "2MiB"}}), 2 * MiB);
  EXPECT_EQ(blocks({{"VGPUMEM_LIMIT", "1G"}, {"VGPUMEM_BLOCK_BYTES", "64M"}}), 64 * MiB);
}

// By next use where a step is learned and asked for (by default under auto
// alone: the vDNN baselines keep the order they had); never without one.
TEST(ParseConfig, VictimsGoByNextUseOnlyUnderALearnedStep) {
  const auto next_use = [](const char* policy, const char* victims) {
    std::map<std::string, std::string> env{{"VGPUMEM_LIMIT", "1G"}, {"VGPUMEM_POLICY", policy}};
    if (victims != nullptr) env["VGPUMEM_VICTIMS"] = victims;
    return orders_victims_by_next_use(parse_ok(env));
  };
  EXPECT_TRUE(next_use("auto", nullptr));
  EXPECT_FALSE(next_use("vdnn-all", nullptr));
  EXPECT_FALSE(next_use("lru", nullptr));
  EXPECT_FALSE(next_use("auto", "lru"));
  EXPECT_TRUE(next_use("vdnn-conv", "next-use"));
  EXPECT_FALSE(next_use("lru", "next-use"));
  EXPECT_FALSE(next_use("off", "next-use"));
  EXPECT_EQ(parse_ok({{"VGPUMEM_LIMIT", "1G"}}).victims, VictimOrder::automatic);
}

TEST(ParseConfig, PolicyDefaultsToAutoOnlyWhenACapIsSet) {
  EXPECT_EQ(parse_ok({{"VGPUMEM_LIMIT", "1G"}}).policy, Policy::automatic);
  EXPECT_EQ(parse_ok({{"VGPUMEM_LIMIT_3", "1G"}}).policy, Policy::automatic);
  EXPECT_EQ(parse_ok({{"VGPUMEM_TRACE", "t.json"}}).policy, Policy::off);
}

TEST(ParseConfig, DeviceLimitAloneCapsOnlyThatDevice) {
  const Config config = parse_ok({{"VGPUMEM_LIMIT_2", "4G"}});
  EXPECT_TRUE(config.any_limit());
  EXPECT_FALSE(config.limit_for(0).is_set());
  EXPECT_EQ(config.limit_for(2).bytes, 4 * GiB);
}

TEST(ParseConfig, IgnoresOtherComponentsVariables) {
  const Config config = parse_ok({{"VGPUSIM_DEVICE_MEMORY", "whatever"}, {"PATH", "/bin"}, {"VGPUMEMORY", "x"}});
  EXPECT_FALSE(config.any_limit());
}

struct BadCase {
  std::string variable;
  std::string value;
};

class BadValue : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadValue, IsAnErrorNamingVariableAndValueOnOneLine) {
  const ConfigError error = parse_error({{GetParam().variable, GetParam().value}});
  EXPECT_EQ(error.variable, GetParam().variable);
  EXPECT_EQ(error.value, GetParam().value);
  const std::string message = error.message();
  EXPECT_EQ(message.rfind("vgpumem: ", 0), 0u) << message;
  EXPECT_NE(message.find(GetParam().variable + "=\"" + GetParam().value + "\""), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(
    EveryVariable, BadValue,
    ::testing::Values(BadCase{"VGPUMEM_LIMIT", ""}, BadCase{"VGPUMEM_LIMIT", "8GB1"}, BadCase{"VGPUMEM_LIMIT", "-3G"},
                      BadCase{"VGPUMEM_LIMIT", "0x10"}, BadCase{"VGPUMEM_LIMIT", "010"},
                      BadCase{"VGPUMEM_LIMIT", "150%"}, BadCase{"VGPUMEM_LIMIT", "0%"}, BadCase{"VGPUMEM_LIMIT", "0"},
                      BadCase{"VGPUMEM_LIMIT", "99999999999999999999"}, BadCase{"VGPUMEM_LIMIT", "1e9"},
                      BadCase{"VGPUMEM_LIMIT", " 8G"}, BadCase{"VGPUMEM_LIMIT", "8 G"}, BadCase{"VGPUMEM_LIMIT", "8GB"},
                      BadCase{"VGPUMEM_LIMIT_0", "lots"}, BadCase{"VGPUMEM_LIMIT_1", "0%"},
                      BadCase{"VGPUMEM_LIMIT_01", "1G"}, BadCase{"VGPUMEM_LIMIT_1024", "1G"},
                      BadCase{"VGPUMEM_LOG_LEVEL", "loud"}, BadCase{"VGPUMEM_LOG_LEVEL", ""},
                      BadCase{"VGPUMEM_LOG_FILE", ""}, BadCase{"VGPUMEM_TRACE", ""},
                      BadCase{"VGPUMEM_TRACE_MAX_EVENTS", "-1"}, BadCase{"VGPUMEM_TRACE_MAX_EVENTS", "0"},
                      BadCase{"VGPUMEM_TRACE_MAX_EVENTS", "1K"}, BadCase{"VGPUMEM_HOST_LIMIT", "50%"},
                      BadCase{"VGPUMEM_HOST_LIMIT", "0"}, BadCase{"VGPUMEM_POLICY", "fastest"},
                      BadCase{"VGPUMEM_GRACE_LAUNCHES", "65537"}, BadCase{"VGPUMEM_GRACE_LAUNCHES", "-1"},
                      BadCase{"VGPUMEM_GRACE_LAUNCHES", ""}, BadCase{"VGPUMEM_GRACE_LAUNCHES", "2.5"},
                      BadCase{"VGPUMEM_GRACE", "all"}, BadCase{"VGPUMEM_GRACE", ""},
                      BadCase{"VGPUMEM_LEND_MAX_BYTES", "100"}, BadCase{"VGPUMEM_LEND_MAX_BYTES", "0"},
                      BadCase{"VGPUMEM_LEND_MAX_BYTES", ""},
                      BadCase{"VGPUMEM_PIECE_BYTES", "3MiB"}, BadCase{"VGPUMEM_PIECE_BYTES", "1K"},
                      BadCase{"VGPUMEM_PIECE_BYTES", "0"}, BadCase{"VGPUMEM_PIECE_BYTES", ""},
                      BadCase{"VGPUMEM_BLOCK_BYTES", "3MiB"}, BadCase{"VGPUMEM_BLOCK_BYTES", "66MiB"},
                      BadCase{"VGPUMEM_BLOCK_BYTES", "0"}, BadCase{"VGPUMEM_BLOCK_BYTES", ""},
                      BadCase{"VGPUMEM_DRIVER", ""}, BadCase{"VGPUMEM_CUPTI", "on"},
                      BadCase{"VGPUMEM_LIBRARY_HOOKS", "auto"}, BadCase{"VGPUMEM_LIBRARY_HOOKS", ""},
                      BadCase{"VGPUMEM_MOVER", "yes"}, BadCase{"VGPUMEM_MOVER", ""},
                      BadCase{"VGPUMEM_CUPTI", ""}, BadCase{"VGPUMEM_VICTIMS", "belady"},
                      BadCase{"VGPUMEM_VICTIMS", ""}, BadCase{"VGPUMEM_LIMT", "8GiB"},
                      BadCase{"VGPUMEM_LIMIT_GPU0", "8GiB"}, BadCase{"VGPUMEM_", "x"}),
    [](const ::testing::TestParamInfo<BadCase>& test) {  // not `info`: the macro's own parameter
      std::string name = test.param.variable + "_" + std::to_string(test.index);
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

TEST(ConfigError, MessageListsTheAcceptedForms) {
  EXPECT_EQ(parse_error({{"VGPUMEM_LIMIT", "8GB1"}}).message(),
            "vgpumem: invalid VGPUMEM_LIMIT=\"8GB1\": expected a size in bytes with an optional unit K/M/G/T "
            "(powers of 1024, also KiB/MiB/GiB/TiB), e.g. 8GiB or 512M, or a percentage of device memory such as 50%");
}

TEST(ConfigError, SaysWhyWhenTheFormsAloneDoNot) {
  EXPECT_NE(parse_error({{"VGPUMEM_LIMIT", "8GB"}}).message().find("use G or GiB"), std::string::npos);
  EXPECT_NE(parse_error({{"VGPUMEM_LIMIT", "0"}}).message().find("zero cap"), std::string::npos);
  EXPECT_NE(parse_error({{"VGPUMEM_LIMIT", "010"}}).message().find("leading zeros"), std::string::npos);
  EXPECT_NE(parse_error({{"VGPUMEM_LIMIT", "150%"}}).message().find("at most 100"), std::string::npos);
  EXPECT_NE(parse_error({{"VGPUMEM_TRACE", ""}}).message().find("empty"), std::string::npos);
}

// A trace that cannot be written is refused before the program runs, not
// discovered at exit after a long run.
// A cap below one 2 MiB chunk refuses every allocation: never what was
// meant. A bare number is most likely a percentage without its sign.
TEST(MemoryLimit, RefusesCapsBelowTheAllocationGranularitySuggestingAPercentage) {
  const std::string fifty = parse_error({{"VGPUMEM_LIMIT", "50"}}).message();
  EXPECT_NE(fifty.find("2 MiB"), std::string::npos) << fifty;
  EXPECT_NE(fifty.find("did you mean 50%?"), std::string::npos) << fifty;
  const std::string half = parse_error({{"VGPUMEM_LIMIT", "0.5"}}).message();
  EXPECT_NE(half.find("did you mean 50%?"), std::string::npos) << half;
  const std::string device = parse_error({{"VGPUMEM_LIMIT_1", "1K"}}).message();
  EXPECT_EQ(device.rfind("vgpumem: invalid VGPUMEM_LIMIT_1=\"1K\": ", 0), 0u) << device;
  EXPECT_NE(device.find("2 MiB"), std::string::npos) << device;
  EXPECT_EQ(device.find("did you mean"), std::string::npos) << device;
  std::string problem;
  EXPECT_FALSE(parse_memory_limit("2097151", &problem));
  EXPECT_NE(problem.find("2 MiB"), std::string::npos) << problem;
  EXPECT_TRUE(parse_memory_limit("2MiB"));
  EXPECT_TRUE(parse_memory_limit("0.5%"));
}

TEST(TraceDestination, IsCheckedWhenTheConfigurationIsRead) {
  const std::string missing = ::testing::TempDir() + "vgpumem-no-such-dir/trace.json";
  const std::string message = parse_error({{"VGPUMEM_TRACE", missing}}).message();
  EXPECT_EQ(message.rfind("vgpumem: invalid VGPUMEM_TRACE=\"" + missing + "\": ", 0), 0u) << message;
  EXPECT_NE(message.find("does not exist"), std::string::npos) << message;
  EXPECT_NE(message.find("expected a file path in an existing, writable directory"), std::string::npos) << message;

  const std::string directory = parse_error({{"VGPUMEM_TRACE", ::testing::TempDir()}}).message();
  EXPECT_NE(directory.find("is a directory"), std::string::npos) << directory;
  EXPECT_EQ(parse_ok({{"VGPUMEM_TRACE", ::testing::TempDir() + "trace-%p.json"}}).trace_path,
            ::testing::TempDir() + "trace-4242.json");
}

TEST(TraceDestination, FallsBackToTheTemporaryDirectoryWithThePid) {
  EXPECT_EQ(fallback_trace_path("/gone/run/trace.json", 77, "/scratch"), "/scratch/trace.json.77");
  EXPECT_EQ(fallback_trace_path("trace.json", 77, nullptr), "/tmp/trace.json.77");
  EXPECT_EQ(fallback_trace_path("/gone/trace.json", 77, ""), "/tmp/trace.json.77");
}

TEST(ConfigError, UnknownVariableSuggestsTheNearestAndListsAll) {
  const ConfigError error = parse_error({{"VGPUMEM_LIMT", "8GiB"}});
  EXPECT_EQ(error.kind, ConfigError::Kind::unknown_variable);
  const std::string message = error.message();
  EXPECT_EQ(message.rfind("vgpumem: unknown variable VGPUMEM_LIMT=\"8GiB\" (did you mean VGPUMEM_LIMIT?); known: ", 0), 0u)
      << message;
  for (std::string_view name : known_variables()) EXPECT_NE(message.find(name), std::string::npos) << name;
}

TEST(ConfigError, EscapesControlCharactersToStayOnOneLine) {
  const std::string message = parse_error({{"VGPUMEM_LIMIT", "8G\n\"x"}}).message();
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_NE(message.find("\"8G\\x0a\\\"x\""), std::string::npos) << message;
}

TEST(ParseConfig, ReportsTheSameErrorWhateverTheEnvironmentOrder) {
  const std::map<std::string, std::string> env = {{"VGPUMEM_ZZZ", "1"}, {"VGPUMEM_AAA", "1"}, {"VGPUMEM_LIMIT", "bad"}};
  std::vector<std::string> forward = {"VGPUMEM_ZZZ", "VGPUMEM_AAA", "VGPUMEM_LIMIT"};
  std::vector<std::string> backward(forward.rbegin(), forward.rend());
  const auto lookup = [&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(parse_config(lookup, forward, 1).error->variable, "VGPUMEM_AAA");
  EXPECT_EQ(parse_config(lookup, backward, 1).error->variable, "VGPUMEM_AAA");
}

}  // namespace
}  // namespace vgpumem
