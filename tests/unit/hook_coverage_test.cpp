// The hooked set stays complete against cuda.h: every driver function whose
// parameters can name device memory (a CUdeviceptr, an array, a tensor map,
// a memory handle, or a descriptor that holds one) is either hooked (interpose/
// hooked_functions.def) or listed with its reason in
// interpose/unhooked_functions.txt. A CUDA upgrade that adds such a function
// fails here until someone decides which.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Parameter types that name device memory: exactly these words, or (for
// families of descriptors) any word that starts so.
// A CUmemGenericAllocationHandle may be one of the virtual handles the pager
// gives the program for its cuMemCreate, which the driver has never seen.
const std::vector<std::string> kMemoryWords = {"CUdeviceptr", "CUarray", "CUmipmappedArray", "CUgraphNodeParams",
                                               "CUstreamBatchMemOpParams", "CUlaunchConfig",
                                               "CUmemGenericAllocationHandle"};
const std::vector<std::string> kMemoryPrefixes = {"CUDA_MEMCPY", "CUDA_MEMSET", "CUDA_KERNEL_NODE_PARAMS",
                                                  "CUDA_BATCH_MEM_OP_NODE_PARAMS", "CUDA_RESOURCE_DESC",
                                                  "CUtensorMap", "CUmemcpy3DOperand"};

bool names_memory(const std::string& params) {
  for (std::size_t at = 0; at < params.size();) {
    if (!identifier_char(params[at])) {
      ++at;
      continue;
    }
    std::size_t end = at;
    while (end < params.size() && identifier_char(params[end])) ++end;
    const std::string word = params.substr(at, end - at);
    if (std::find(kMemoryWords.begin(), kMemoryWords.end(), word) != kMemoryWords.end()) return true;
    for (const std::string& prefix : kMemoryPrefixes) {
      if (word.rfind(prefix, 0) == 0) return true;
    }
    at = end;
  }
  return false;
}

// The exported symbol each public name reaches: cuda.h maps legacy names
// onto their newest variant (`#define cuMemAlloc cuMemAlloc_v2`, or through
// __CUDA_API_PTDS/__CUDA_API_PTSZ, whose legacy form is the argument).
std::map<std::string, std::string> symbol_of_name(const std::string& header) {
  std::map<std::string, std::string> symbols;
  std::istringstream lines(header);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string define, name, target;
    words >> define >> name >> target;
    if (define != "#define" || name.rfind("cu", 0) != 0 || target.empty()) continue;
    for (const char* wrapper : {"__CUDA_API_PTDS(", "__CUDA_API_PTSZ("}) {
      if (target.rfind(wrapper, 0) == 0 && target.back() == ')') {
        target = target.substr(std::string(wrapper).size(), target.size() - std::string(wrapper).size() - 1);
      }
    }
    if (target.rfind("cu", 0) == 0 && std::all_of(target.begin(), target.end(), identifier_char)) {
      symbols.emplace(name, target);
    }
  }
  return symbols;
}

struct Declaration {
  std::string symbol;
  std::string params;
};

// Every `CUresult CUDAAPI name(params);` of the public part of `header` (the
// part after `#if defined(__CUDA_API_VERSION_INTERNAL)` re-declares the
// legacy ABI variants for the driver's own build), by exported symbol.
std::vector<Declaration> public_declarations(const std::string& header) {
  const std::string internal = "\n#if defined(__CUDA_API_VERSION_INTERNAL)\n";
  const std::string text = header.substr(0, header.rfind(internal));
  const std::map<std::string, std::string> symbols = symbol_of_name(text);
  std::vector<Declaration> declarations;
  const std::string marker = "CUresult CUDAAPI ";
  for (std::size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1)) {
    std::size_t name_end = at + marker.size();
    while (name_end < text.size() && identifier_char(text[name_end])) ++name_end;
    const std::string name = text.substr(at + marker.size(), name_end - at - marker.size());
    const std::size_t open = text.find('(', name_end), close = text.find(';', name_end);
    if (name.empty() || open == std::string::npos || close == std::string::npos || open > close) continue;
    const auto symbol = symbols.find(name);
    declarations.push_back({symbol == symbols.end() ? name : symbol->second, text.substr(open, close - open)});
  }
  return declarations;
}

std::set<std::string> hooked_symbols(const std::string& def) {
  std::set<std::string> hooked;
  const std::string marker = "\nVGPUMEM_HOOK(";
  for (std::size_t at = def.find(marker); at != std::string::npos; at = def.find(marker, at + 1)) {
    const std::size_t start = at + marker.size();
    hooked.insert(def.substr(start, def.find(',', start) - start));
  }
  return hooked;
}

// interpose/unhooked_functions.txt: `symbol  reason`, one a line; # comments.
std::map<std::string, std::string> exemptions(const std::string& text) {
  std::map<std::string, std::string> reasons;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string symbol, reason;
    words >> symbol;
    std::getline(words, reason);
    reason.erase(0, reason.find_first_not_of(' '));
    reasons[symbol] = reason;
  }
  return reasons;
}

// The driver functions that name device memory and have no hook.
std::set<std::string> unhooked_memory_functions(const std::string& header, const std::set<std::string>& hooked) {
  std::set<std::string> unhooked;
  for (const Declaration& d : public_declarations(header)) {
    if (names_memory(d.params) && hooked.count(d.symbol) == 0) unhooked.insert(d.symbol);
  }
  return unhooked;
}

TEST(HookCoverageScanner, FindsWhatAHeaderDeclares) {
  const std::string header =
      "#define cuMemcpyHtoD __CUDA_API_PTDS(cuMemcpyHtoD_v2)\n"
      "#define cuMemAlloc cuMemAlloc_v2\n"
      "CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize);\n"
      "CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dstDevice,\n    const void *srcHost, size_t ByteCount);\n"
      "CUresult CUDAAPI cuCtxSynchronize(void);\n"
      "CUresult CUDAAPI cuArrayGetDescriptor(CUDA_ARRAY_DESCRIPTOR *d, CUarray hArray);\n"
      "CUresult CUDAAPI cuTexRefSetFormat(CUtexref hTexRef, CUarray_format fmt, int n);\n"
      "CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode *n, const CUDA_MEMCPY3D *copyParams);\n"
      "\n#if defined(__CUDA_API_VERSION_INTERNAL)\n"
      "CUresult CUDAAPI cuMemFree(CUdeviceptr dptr);\n";
  const std::set<std::string> unhooked = unhooked_memory_functions(header, {"cuMemAlloc_v2"});
  EXPECT_EQ(unhooked, (std::set<std::string>{"cuMemcpyHtoD_v2", "cuArrayGetDescriptor", "cuGraphAddMemcpyNode"}));
  const std::string def = "// x\nVGPUMEM_HOOK(cuMemFree_v2, PFN, cuMemFree, 3020, legacy)\n";
  EXPECT_EQ(hooked_symbols(def), (std::set<std::string>{"cuMemFree_v2"}));
  EXPECT_EQ(exemptions("# c\ncuA  why not\n\ncuB\n"), (std::map<std::string, std::string>{{"cuA", "why not"}, {"cuB", ""}}));
}

class HookCoverage : public ::testing::Test {
 protected:
  const std::string header_ = read_file(VGPUMEM_CUDA_HEADER);
  // The leading newline lets the parser treat the first line like any other
  // (appended, not prepended: GCC 12 at -O3 warns, falsely, on the insert).
  const std::set<std::string> hooked_ =
      hooked_symbols(std::string("\n").append(read_file(std::string(VGPUMEM_SOURCE_DIR) + "/interpose/hooked_functions.def")));
  const std::map<std::string, std::string> exempt_ =
      exemptions(read_file(std::string(VGPUMEM_SOURCE_DIR) + "/interpose/unhooked_functions.txt"));
};

TEST_F(HookCoverage, EveryDriverFunctionThatNamesDeviceMemoryIsHookedOrHasAReason) {
  ASSERT_GT(public_declarations(header_).size(), 400u) << "cuda.h read from " << VGPUMEM_CUDA_HEADER;
  ASSERT_GT(hooked_.size(), 100u);
  std::string missing;
  for (const std::string& symbol : unhooked_memory_functions(header_, hooked_)) {
    if (exempt_.count(symbol) == 0) missing += " " + symbol;
  }
  EXPECT_TRUE(missing.empty()) << "no hook and no reason in interpose/unhooked_functions.txt:" << missing;
}

TEST_F(HookCoverage, EveryReasonIsForAnUnhookedFunctionAndSaysWhy) {
  const std::set<std::string> unhooked = unhooked_memory_functions(header_, hooked_);
  for (const auto& [symbol, reason] : exempt_) {
    EXPECT_EQ(hooked_.count(symbol), 0u) << symbol << " is hooked: its reason is stale";
    EXPECT_EQ(unhooked.count(symbol), 1u) << symbol << " is not a driver function that names device memory";
    EXPECT_GE(reason.size(), 20u) << symbol << ": the reason must say why";
  }
}

}  // namespace
