// Copies, stream memory operations, textures and shared pages, end to end
// (Note [Copies and stream memory operations], interpose/hooks_copy.cpp): words written and waited on by cuStreamWriteValue,
// cuStreamWaitValue and cuStreamBatchMemOp; buffers moved by cuMemcpyPeer,
// cuMemcpy3DPeer, array copies, cuMemcpyBatchAsync and cuMemcpy3DBatchAsync;
// and buffers read through a texture object by a kernel, through a dma-buf
// by a NIC, or written through a multicast object by another GPU: exact,
// with ten buffers at 2.5 times the cap. Under strict and torture an operand
// the shim did not make resident would fault or land elsewhere; the launch
// grace is off, so nothing but the hooks keeps an operand on the device.
#include <gtest/gtest.h>

#include <string>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kCap = 16ull << 20;

void expect_exact_memops(const std::string& check) {
  const PagedRun run = run_paged("memop_" + check, {program("memop_probe")}, "16MiB",
                                 {{"VGPUMEM_CHECK", check}, {"VGPUMEM_GRACE_LAUNCHES", "0"}, {"VGPUMEM_LOG_LEVEL", "info"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "memop ok", kCap));
  const nlohmann::json& calls = run.simulator["calls"];
  EXPECT_FALSE(calls.contains("stream_waits_unmet")) << "every wait found its value: " << calls.dump();
  for (const char* api : {"cuStreamWriteValue32_v2", "cuStreamWriteValue64_v2", "cuStreamWaitValue32_v2",
                          "cuStreamWaitValue64_v2", "cuStreamBatchMemOp_v2", "cuMemcpyPeer", "cuMemcpyPeerAsync",
                          "cuMemcpy3DPeer", "cuMemcpy3DPeerAsync", "cuMemcpyDtoA_v2",
                          "cuMemcpyAtoD_v2", "cuMemcpyBatchAsync_v2", "cuMemcpy3DBatchAsync_v2", "cuTexObjectCreate",
                          "cuTexObjectDestroy", "cuMemGetHandleForAddressRange", "cuMulticastBindAddr",
                          "cuMulticastBindMem"}) {
    EXPECT_TRUE(calls.contains(api)) << api << " reached the driver: " << calls.dump();
  }
  EXPECT_GT(run.trace["vgpumem"]["paging"]["offloads"].get<int>(), 20);
  EXPECT_EQ(run.trace["vgpumem"]["paging"]["dma_buf_pinned_bytes"].get<std::uint64_t>(), 0u) << "freed at the end";
  EXPECT_NE(run.process.err.find("the program exported it as a dma-buf"), std::string::npos) << "pinned, and said so";
}

TEST(PagingMemops, CopiesStreamWordsTexturesAndSharedPagesAreExactUnderTorture) { expect_exact_memops("torture"); }
TEST(PagingMemops, CopiesStreamWordsTexturesAndSharedPagesAreExactUnderStrict) { expect_exact_memops("strict"); }

}  // namespace
}  // namespace vgpumem::test
