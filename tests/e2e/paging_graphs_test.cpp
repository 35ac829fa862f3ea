// Graphs built node by node, end to end (Note [Graphs built node by node], interpose/hooks_graph.cpp):
// kernel, memcpy, memset and batch memory operation nodes, added by their
// own entry points and by cuGraphAddNode, and kernel nodes re-pointed in the graph and in an
// instantiation, launched between kernels that page other buffers through
// what the pins leave of the cap: every byte exact. Under strict and
// torture a node's memory that was not pinned would fault (the launch grace
// is off, so nothing but the pins keeps it).
#include <gtest/gtest.h>

#include <string>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

void expect_exact_graph(const std::string& check) {
  const PagedRun run = run_paged("graph_" + check, {program("graph_probe")}, "16MiB",
                                 {{"VGPUMEM_CHECK", check}, {"VGPUMEM_GRACE_LAUNCHES", "0"},
                                  {"VGPUMEM_LOG_LEVEL", "info"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "graph ok", 16 * kMiB));
  const nlohmann::json& calls = run.simulator["calls"];
  for (const char* api : {"cuGraphAddKernelNode_v2", "cuGraphAddMemcpyNode", "cuGraphAddMemsetNode",
                          "cuGraphAddNode_v2", "cuGraphKernelNodeSetParams_v2", "cuGraphExecKernelNodeSetParams_v2",
                          "cuGraphAddBatchMemOpNode"}) {
    EXPECT_TRUE(calls.contains(api)) << api << " reached the driver: " << calls.dump();
  }
  const nlohmann::json& paging = run.trace["vgpumem"]["paging"];
  EXPECT_GT(paging["offloads"].get<int>(), 0);
  EXPECT_EQ(paging["graph_node_pinned_bytes"].get<std::uint64_t>(), 0u) << "freed at the end";
  EXPECT_NE(run.process.err.find("a node of an explicitly built graph names it"), std::string::npos)
      << "pinned, and said so";
}

TEST(PagingGraphs, AGraphBuiltNodeByNodeIsExactUnderTorture) { expect_exact_graph("torture"); }
TEST(PagingGraphs, AGraphBuiltNodeByNodeIsExactUnderStrict) { expect_exact_graph("strict"); }

}  // namespace
}  // namespace vgpumem::test
