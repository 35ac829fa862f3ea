// Build-time guards on libvgpumem.so itself: what it links, what it exports,
// and what its sources are allowed to do.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "process.h"

namespace vgpumem::test {
namespace {

std::string command_output(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
  pclose(pipe);
  return out;
}

std::set<std::string> hooked_symbols() {
  std::set<std::string> symbols;
  std::ifstream def(std::string(VGPUMEM_TEST_SOURCE_DIR) + "/interpose/hooked_functions.def");
  const std::regex entry(R"(^VGPUMEM_HOOK\((\w+),)");
  for (std::string line; std::getline(def, line);) {
    std::smatch match;
    if (std::regex_search(line, match, entry)) symbols.insert(match[1]);
  }
  return symbols;
}

TEST(Library, HasNoNeededEntryOnTheDriverOrRuntime) {
  const std::string dynamic = command_output("readelf -d " + shim_library());
  ASSERT_NE(dynamic.find("NEEDED"), std::string::npos) << dynamic;
  EXPECT_EQ(dynamic.find("libcuda"), std::string::npos) << dynamic;
  EXPECT_EQ(dynamic.find("libcudart"), std::string::npos) << dynamic;
  EXPECT_EQ(dynamic.find("libspdlog"), std::string::npos) << dynamic;
  EXPECT_EQ(dynamic.find("libfmt"), std::string::npos) << dynamic;
}

TEST(Library, ExportsExactlyTheHookTableTheProfilerEntryPointsAndDlsym) {
  const std::string symbols = command_output("nm -D --defined-only " + shim_library());
  std::set<std::string> exported;
  std::istringstream in(symbols);
  for (std::string address, type, name; in >> address >> type >> name;) {
    if (type == "T" || type == "t" || type == "W" || type == "i") exported.insert(name);
  }
  std::set<std::string> expected = hooked_symbols();
  ASSERT_GT(expected.size(), 60u);
  expected.insert("dlsym");
  // The CUPTI entry points a profiler starts with: each makes vgpumem step
  // aside from CUPTI before forwarding (interpose/hooks_cupti.cpp).
  for (const char* cupti : {"cuptiSubscribe", "cuptiSubscribe_v2", "cuptiActivityRegisterCallbacks",
                            "cuptiActivityEnable", "cuptiActivityEnableContext"}) {
    expected.insert(cupti);
  }
  std::set<std::string> extra, missing;
  for (const auto& s : exported) {
    if (!expected.count(s)) extra.insert(s);
  }
  for (const auto& s : expected) {
    if (!exported.count(s)) missing.insert(s);
  }
  // Sanitizer builds add their own interface symbols; the hooks must still all be there.
  if (std::string(VGPUMEM_TEST_PRELOAD_PREFIX).empty()) {
    EXPECT_TRUE(extra.empty()) << "unexpected export: " << *extra.begin();
  }
  EXPECT_TRUE(missing.empty()) << "missing export: " << (missing.empty() ? "" : *missing.begin());
  // Exported unversioned, so they satisfy versioned references (dlsym@GLIBC_2.2.5).
  EXPECT_EQ(command_output("readelf --dyn-syms -W " + shim_library() + " | grep ' dlsym@'"), "");
}

// Source guards: the library never calls glibc's dlsym directly (every
// look-up goes through real_dlsym, which cannot recurse into our override),
// the only load-time constructor is the configuration check, and every hook
// is defined through VGPUMEM_HOOK_DEFINE (hook_support.h), so none can let an
// exception out or touch the shim's locks in a forked child.
TEST(Library, SourcesFollowTheInterpositionRules) {
  const std::regex bare_dlsym(R"((^|[^_\w])dlsym\s*\()");
  const std::regex constructor(R"(__attribute__\s*\(\(\s*constructor)");
  const std::regex unguarded_hook(R"(extern\s+"C"\s+CUresult\s+\w+\s*\()");
  for (const char* dir : {"interpose", "shim", "vmm", "trace", "scheduler", "cupti"}) {
    const std::filesystem::path root = std::filesystem::path(VGPUMEM_TEST_SOURCE_DIR) / dir;
    if (!std::filesystem::exists(root)) continue;
    for (const auto& file : std::filesystem::recursive_directory_iterator(root)) {
      const auto ext = file.path().extension();
      if (ext != ".cpp" && ext != ".h") continue;
      std::ifstream in(file.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string source = text.str();
      EXPECT_FALSE(std::regex_search(source, bare_dlsym)) << file.path() << " calls dlsym() directly";
      EXPECT_FALSE(std::regex_search(source, unguarded_hook))
          << file.path() << " defines a hook without VGPUMEM_HOOK_DEFINE";
      if (file.path().filename() != "lifecycle.cpp") {
        EXPECT_FALSE(std::regex_search(source, constructor)) << file.path() << " has a load-time constructor";
      }
    }
  }
}

}  // namespace
}  // namespace vgpumem::test
