// LaunchArgs against a scripted driver: every parameter is read however many
// there are, a layout is read again after a module unload (the handle may be
// another kernel's by then), and an unreadable kernel says so.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "vmm/launch_args.h"

namespace vgpumem::vmm {
namespace {

// The scripted driver: the kernel's parameters are `g_sizes`, laid out one
// after another; `g_refuse` makes every query fail as an old driver would.
std::vector<std::size_t> g_sizes;
bool g_refuse = false;

CUresult param_info(CUfunction, size_t index, size_t* offset, size_t* size) {
  if (g_refuse) return CUDA_ERROR_NOT_SUPPORTED;
  if (index >= g_sizes.size()) return CUDA_ERROR_INVALID_VALUE;
  std::size_t at = 0;
  for (std::size_t i = 0; i < index; ++i) at += g_sizes[i];
  *offset = at;
  *size = g_sizes[index];
  return CUDA_SUCCESS;
}

CUresult name_of(const char** name, CUfunction) {
  *name = "scripted_kernel";
  return CUDA_SUCCESS;
}

DriverOps scripted() {
  DriverOps ops;
  ops.func_param_info = &param_info;
  ops.func_get_name = &name_of;
  return ops;
}

CUfunction fake_function() { return reinterpret_cast<CUfunction>(std::uintptr_t{0x1000}); }

TEST(LaunchArgs, ReadsEveryParameterOfAKernelWithMoreThanTwoHundredFiftySix) {
  g_refuse = false;
  g_sizes.assign(300, 8);
  const DriverOps ops = scripted();
  LaunchArgs args(ops);
  std::vector<std::uint64_t> values(300), words(300);
  std::vector<void*> params(300);
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = 0xA000 + i;
    params[i] = &values[i];
  }
  const LaunchArgs::Scan scan = args.scan(fake_function(), params.data(), nullptr, words.data(), words.size());
  ASSERT_TRUE(scan.readable);
  ASSERT_EQ(scan.count, 300u);
  EXPECT_EQ(words[299], 0xA000u + 299) << "the last parameter is scanned too";
  ASSERT_NE(scan.kernel, nullptr);
  EXPECT_EQ(scan.kernel->name, "scripted_kernel");
}

TEST(LaunchArgs, ReadsTheLayoutAgainAfterAModuleIsUnloaded) {
  g_refuse = false;
  g_sizes = {8};
  const DriverOps ops = scripted();
  LaunchArgs args(ops);
  std::uint64_t first = 1, second = 2;
  void* params[] = {&first, &second};
  std::uint64_t words[4] = {};
  EXPECT_EQ(args.scan(fake_function(), params, nullptr, words, 4).count, 1u);
  g_sizes = {8, 8};  // the handle now belongs to a kernel with two pointers
  EXPECT_EQ(args.scan(fake_function(), params, nullptr, words, 4).count, 1u) << "cached, as it should be";
  args.module_unloaded();
  EXPECT_EQ(args.scan(fake_function(), params, nullptr, words, 4).count, 2u) << "read again after the unload";
  EXPECT_EQ(words[1], 2u);
}

TEST(LaunchArgs, AKernelTheDriverCannotDescribeIsUnreadableAndAudited) {
  g_refuse = true;
  g_sizes = {8};
  const DriverOps ops = scripted();
  LaunchArgs args(ops);
  std::uint64_t value = 1;
  void* params[] = {&value};
  std::uint64_t words[1] = {};
  const LaunchArgs::Scan scan = args.scan(fake_function(), params, nullptr, words, 1);
  EXPECT_FALSE(scan.readable);
  ASSERT_NE(scan.kernel, nullptr);
  scan.kernel->unscannable.fetch_add(1);
  const nlohmann::json audit = args.audit();
  EXPECT_EQ(audit["scripted_kernel"]["unscannable_launches"].get<int>(), 1) << audit.dump();
  g_refuse = false;
}

}  // namespace
}  // namespace vgpumem::vmm
