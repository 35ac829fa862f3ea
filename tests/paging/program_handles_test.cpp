// The program's own virtual memory, paged (vmm/program_handles.cpp): handles
// from cuMemCreate mapped into the program's own reservations move to the
// host and back at the addresses the program chose, mappings next to each
// other stay resident while they touch, an exported handle becomes one real
// allocation, and unmap, access and release behave as the driver's would.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "pager_fixture.h"

namespace vgpumem::test {
namespace {

CUmemAllocationProp device_prop() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;  // as PyTorch asks
  return prop;
}

CUmemAccessDesc read_write() {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return access;
}

class ProgramHandlesTest : public PagerTest {
 protected:
  // A reservation of the program's, covered by the pager as the hook does.
  void reserve(std::uint64_t bytes) {
    ASSERT_EQ(cuMemAddressReserve(&reservation_, bytes, 0, 0, 0), CUDA_SUCCESS);
    reserved_ = bytes;
    pager_->program_reserved(reservation_, bytes);
  }
  // A virtual handle of `bytes`, mapped at `address` with read-write access.
  CUmemGenericAllocationHandle map_new(CUdeviceptr address, std::uint64_t bytes) {
    CUmemGenericAllocationHandle handle = 0;
    const CUmemAllocationProp prop = device_prop();
    EXPECT_EQ(pager_->create_handle(0, bytes, prop, &handle), CUDA_SUCCESS);
    EXPECT_TRUE(vmm::Pager::is_virtual(handle));
    EXPECT_EQ(pager_->map_handle(address, bytes, 0, handle, 0), CUDA_SUCCESS);
    const CUmemAccessDesc access = read_write();
    EXPECT_EQ(pager_->set_program_access(address, bytes, &access, 1), CUDA_SUCCESS);
    return handle;
  }
  void unmap_and_release(CUdeviceptr address, std::uint64_t bytes, CUmemGenericAllocationHandle handle) {
    EXPECT_EQ(pager_->unmap_program_range(address, bytes), CUDA_SUCCESS);
    EXPECT_EQ(pager_->release_handle(handle), CUDA_SUCCESS);
  }
  nlohmann::json program_handles() { return pager_->summary()["program_handles"]; }

  CUdeviceptr reservation_ = 0;
  std::uint64_t reserved_ = 0;
};

TEST_F(ProgramHandlesTest, HandlesMappedApartAreThreeTimesTheCapAndComeBackBitIdentical) {
  make_pager(8 * kMiB);
  reserve(64 * kMiB);
  // Six 4 MiB handles, each mapped with a gap after it, as an allocator
  // that maps one handle per buffer does.
  std::vector<CUdeviceptr> buffers(6);
  std::vector<CUmemGenericAllocationHandle> handles(6);
  for (unsigned i = 0; i < buffers.size(); ++i) {
    buffers[i] = reservation_ + i * 8 * kMiB;
    handles[i] = map_new(buffers[i], 4 * kMiB);
    ASSERT_NO_FATAL_FAILURE(write(buffers[i], 4 * kMiB, i));
  }
  expect_held(buffers, 4 * kMiB);
  expect_held(buffers, 4 * kMiB);
  const nlohmann::json summary = pager_->summary();
  EXPECT_GE(summary["offloads"].get<int>(), 10);
  EXPECT_LE(ledger_->usage(0).peak, 8 * kMiB);
  EXPECT_EQ(program_handles()["live"].get<int>(), 6);
  EXPECT_EQ(program_handles()["neighbour_pins"].get<int>(), 0);
  for (unsigned i = 0; i < buffers.size(); ++i) unmap_and_release(buffers[i], 4 * kMiB, handles[i]);
  EXPECT_EQ(program_handles()["live"].get<int>(), 0);
  EXPECT_EQ(pager_->resident_bytes(0), 0u);
  EXPECT_EQ(pager_->free_program_reservation(reservation_, reserved_), CUDA_SUCCESS);
}

TEST_F(ProgramHandlesTest, HandlesMappedSideBySideStayResidentWhileTheyTouch) {
  make_pager(12 * kMiB);
  reserve(64 * kMiB);
  // A segment grown handle by handle, as PyTorch's expandable segments do:
  // a buffer may span both, so neither may leave while the other is there.
  const CUdeviceptr first = reservation_, second = reservation_ + 4 * kMiB;
  const CUmemGenericAllocationHandle a = map_new(first, 4 * kMiB);
  const CUmemGenericAllocationHandle b = map_new(second, 4 * kMiB);
  ASSERT_NO_FATAL_FAILURE(write(first, 8 * kMiB, 7));  // one write across both
  EXPECT_EQ(program_handles()["neighbour_pins"].get<int>(), 2);
  std::vector<CUdeviceptr> others(3);
  ASSERT_NO_FATAL_FAILURE(allocate_written(others, 4 * kMiB));  // 12 MiB more through the 4 MiB left
  expect_held(others, 4 * kMiB);
  EXPECT_GE(pager_->summary()["offloads"].get<int>(), 2);
  EXPECT_TRUE(mapped_now(first, 8 * kMiB)) << "the segment was offloaded under a buffer that spans it";
  EXPECT_TRUE(holds(first, 8 * kMiB, 7));

  // Apart again, the first handle pages like any buffer.
  EXPECT_EQ(pager_->unmap_program_range(second, 4 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(pager_->release_handle(b), CUDA_SUCCESS);
  EXPECT_EQ(program_handles()["neighbour_pins"].get<int>(), 0);
  std::vector<CUdeviceptr> more(2);
  ASSERT_NO_FATAL_FAILURE(allocate_written(more, 4 * kMiB));
  expect_held(others, 4 * kMiB);
  expect_held(more, 4 * kMiB);
  EXPECT_FALSE(mapped_now(first, 4 * kMiB)) << "the handle alone should have been offloaded";
  EXPECT_TRUE(holds(first, 4 * kMiB, 7));
  unmap_and_release(first, 4 * kMiB, a);
  CUresult result = CUDA_SUCCESS;
  for (CUdeviceptr p : others) {
    EXPECT_TRUE(pager_->free(p, &result));
    EXPECT_EQ(result, CUDA_SUCCESS);
  }
  for (CUdeviceptr p : more) {
    EXPECT_TRUE(pager_->free(p, &result));
    EXPECT_EQ(result, CUDA_SUCCESS);
  }
}

TEST_F(ProgramHandlesTest, AReleasedHandleLivesUntilItsLastMappingGoes) {
  make_pager(8 * kMiB);
  reserve(16 * kMiB);
  const CUmemGenericAllocationHandle handle = map_new(reservation_, 4 * kMiB);
  ASSERT_NO_FATAL_FAILURE(write(reservation_, 4 * kMiB, 3));
  EXPECT_EQ(pager_->release_handle(handle), CUDA_SUCCESS);
  EXPECT_TRUE(holds(reservation_, 4 * kMiB, 3)) << "released but still mapped: the memory stays";
  CUmemGenericAllocationHandle retained = 0;
  ASSERT_TRUE(pager_->retain_handle(reservation_ + kMiB, &retained));
  EXPECT_EQ(retained, handle);
  CUmemAllocationProp prop{};
  EXPECT_EQ(pager_->handle_properties(handle, &prop), CUDA_SUCCESS);
  EXPECT_EQ(prop.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) << "the program's own properties";
  unmap_and_release(reservation_, 4 * kMiB, handle);
  EXPECT_EQ(pager_->handle_properties(handle, &prop), CUDA_ERROR_INVALID_VALUE) << "gone with its last mapping";
  EXPECT_EQ(pager_->map_handle(reservation_, 4 * kMiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(pager_->release_handle(handle), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(pager_->resident_bytes(0), 0u);

  // Released first, with no other reference: the unmap frees it.
  const CUmemGenericAllocationHandle second = map_new(reservation_, 4 * kMiB);
  EXPECT_EQ(pager_->release_handle(second), CUDA_SUCCESS);
  EXPECT_EQ(program_handles()["live"].get<int>(), 1);
  EXPECT_EQ(pager_->unmap_program_range(reservation_, 4 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(program_handles()["live"].get<int>(), 0) << "its last mapping went";
  EXPECT_EQ(pager_->resident_bytes(0), 0u);
}

TEST_F(ProgramHandlesTest, UnmapAndAccessSayWhatTheDriverWouldAndPassTheRestOn) {
  make_pager(16 * kMiB);
  reserve(32 * kMiB);
  const CUmemGenericAllocationHandle handle = map_new(reservation_ + 8 * kMiB, 4 * kMiB);
  EXPECT_EQ(pager_->unmap_program_range(reservation_ + 8 * kMiB, 2 * kMiB), CUDA_ERROR_INVALID_VALUE)
      << "half a mapping";
  EXPECT_EQ(pager_->map_handle(reservation_ + 10 * kMiB, 2 * kMiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE)
      << "over a mapping";
  EXPECT_EQ(pager_->free_program_reservation(reservation_, reserved_), CUDA_ERROR_INVALID_VALUE)
      << "a reservation with a mapping in it";
  EXPECT_TRUE(pager_->holds_any(reservation_ + 6 * kMiB, 4 * kMiB)) << "the cuMemMap hook refuses a real handle there";
  EXPECT_FALSE(pager_->holds_any(reservation_ + 12 * kMiB, 2 * kMiB));
  // A real handle of the program's right after it: a neighbour too.
  CUmemGenericAllocationHandle real = 0;
  const CUmemAllocationProp prop = device_prop();
  ASSERT_EQ(cuMemCreate(&real, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(reservation_ + 12 * kMiB, 2 * kMiB, 0, real, 0), CUDA_SUCCESS);
  pager_->note_foreign_mapping(reservation_ + 12 * kMiB, 2 * kMiB);
  EXPECT_EQ(program_handles()["neighbour_pins"].get<int>(), 1);
  const CUmemAccessDesc access = read_write();
  EXPECT_EQ(pager_->set_program_access(reservation_ + 8 * kMiB, 6 * kMiB, &access, 1), CUDA_SUCCESS)
      << "one call over the paged mapping and the driver's";
  EXPECT_TRUE(mapped_now(reservation_ + 12 * kMiB, 2 * kMiB)) << "the driver's part got its access";
  EXPECT_EQ(pager_->unmap_program_range(reservation_ + 8 * kMiB, 6 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(program_handles()["neighbour_pins"].get<int>(), 0);
  EXPECT_EQ(cuMemRelease(real), CUDA_SUCCESS);
  EXPECT_EQ(pager_->release_handle(handle), CUDA_SUCCESS);
  EXPECT_EQ(pager_->free_program_reservation(reservation_, reserved_), CUDA_SUCCESS)
      << "the driver agrees nothing is mapped there any more";
}

TEST_F(ProgramHandlesTest, AnExportedHandleBecomesOneRealAllocationPinnedResident) {
  make_pager(8 * kMiB);
  reserve(16 * kMiB);
  const CUmemGenericAllocationHandle handle = map_new(reservation_, 4 * kMiB);
  ASSERT_NO_FATAL_FAILURE(write(reservation_, 4 * kMiB, 5));
  CUmemGenericAllocationHandle real = 0;
  ASSERT_EQ(pager_->real_handle(handle, &real), CUDA_SUCCESS);
  EXPECT_FALSE(vmm::Pager::is_virtual(real));
  int fd = -1;
  ASSERT_EQ(cuMemExportToShareableHandle(&fd, real, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_SUCCESS);
  ::close(fd);
  EXPECT_TRUE(holds(reservation_, 4 * kMiB, 5)) << "its bytes moved into the real allocation";
  std::vector<CUdeviceptr> others(3);
  ASSERT_NO_FATAL_FAILURE(allocate_written(others, 2 * kMiB));
  expect_held(others, 2 * kMiB);
  EXPECT_TRUE(mapped_now(reservation_, 4 * kMiB)) << "exported memory must never move";
  EXPECT_EQ(program_handles()["materialized"].get<int>(), 1);
  EXPECT_EQ(pager_->summary()["handle_exported_pinned_bytes"].get<std::uint64_t>(), 4 * kMiB);
  EXPECT_LE(ledger_->usage(0).peak, 8 * kMiB);
  CUmemGenericAllocationHandle again = 0;
  EXPECT_EQ(pager_->real_handle(handle, &again), CUDA_SUCCESS);
  EXPECT_EQ(again, real) << "one real allocation, however often it is exported";
  unmap_and_release(reservation_, 4 * kMiB, handle);
  CUresult result = CUDA_SUCCESS;
  for (CUdeviceptr p : others) {
    EXPECT_TRUE(pager_->free(p, &result));
    EXPECT_EQ(result, CUDA_SUCCESS);
  }
  EXPECT_EQ(ledger_->usage(0).counted, pager_->idle_chunk_bytes(0)) << "the real allocation was refunded";
}

// An export while a copy holds the handle's unit as one operand and needs
// the pager's lock for its other: the export waits for the copy with the
// lock let go (it once waited holding it, and both waited for ever).
TEST_F(ProgramHandlesTest, AnExportWaitsForACopyHoldingTheHandleWithoutHoldingTheLock) {
  make_pager(8 * kMiB);
  reserve(16 * kMiB);
  const CUmemGenericAllocationHandle handle = map_new(reservation_, 2 * kMiB);
  ASSERT_NO_FATAL_FAILURE(write(reservation_, 2 * kMiB, 5));
  std::vector<CUdeviceptr> others(4);
  ASSERT_NO_FATAL_FAILURE(allocate_written(others, 2 * kMiB));  // the handle goes to the host
  vmm::Access copy;
  ASSERT_EQ(pager_->prepare_range(reservation_, 2 * kMiB, nullptr, false, copy), CUDA_SUCCESS);  // back, held
  CUmemGenericAllocationHandle real = 0;
  CUcontext context = nullptr;
  ASSERT_EQ(cuCtxGetCurrent(&context), CUDA_SUCCESS);
  std::thread exporter([&] {
    EXPECT_EQ(cuCtxSetCurrent(context), CUDA_SUCCESS);
    EXPECT_EQ(pager_->real_handle(handle, &real), CUDA_SUCCESS);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the export is waiting for the hold
  // The copy's other operand: the first buffer went to the host when the
  // handle came back, so this takes the slow path, under the lock.
  auto second = std::async(std::launch::async, [&] {
    EXPECT_EQ(cuCtxSetCurrent(context), CUDA_SUCCESS);
    return pager_->prepare_range(others[0], 2 * kMiB, nullptr, false, copy);
  });
  if (second.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "the copy's second operand never got the lock: deadlocked against the export";
    std::_Exit(1);  // the threads cannot be unwound
  }
  EXPECT_EQ(second.get(), CUDA_SUCCESS);
  copy.release();  // the copy is enqueued
  exporter.join();
  EXPECT_FALSE(vmm::Pager::is_virtual(real));
  EXPECT_TRUE(holds(reservation_, 2 * kMiB, 5));
  expect_held(others, 2 * kMiB);
  unmap_and_release(reservation_, 2 * kMiB, handle);
  CUresult result = CUDA_SUCCESS;
  for (CUdeviceptr p : others) {
    EXPECT_TRUE(pager_->free(p, &result));
    EXPECT_EQ(result, CUDA_SUCCESS);
  }
}

TEST_F(ProgramHandlesTest, AMappingAtAnOffsetIntoTheHandleSeesThoseBytes) {
  make_pager(8 * kMiB);
  reserve(32 * kMiB);
  CUmemGenericAllocationHandle handle = 0;
  const CUmemAllocationProp prop = device_prop();
  ASSERT_EQ(pager_->create_handle(0, 6 * kMiB, prop, &handle), CUDA_SUCCESS);
  const CUmemAccessDesc access = read_write();
  // The whole handle at one place, its last 2 MiB again at another.
  ASSERT_EQ(pager_->map_handle(reservation_, 6 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(pager_->map_handle(reservation_ + 16 * kMiB, 2 * kMiB, 4 * kMiB, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(pager_->set_program_access(reservation_, 6 * kMiB, &access, 1), CUDA_SUCCESS);
  ASSERT_EQ(pager_->set_program_access(reservation_ + 16 * kMiB, 2 * kMiB, &access, 1), CUDA_SUCCESS);
  ASSERT_NO_FATAL_FAILURE(write(reservation_ + 16 * kMiB, 2 * kMiB, 9));
  std::vector<CUdeviceptr> others(2);
  ASSERT_NO_FATAL_FAILURE(allocate_written(others, 4 * kMiB));  // pushes the handle out and back
  std::vector<unsigned char> through_whole(2 * kMiB), expected(2 * kMiB);
  fill_pattern(expected.data(), expected.size(), 9);
  {
    vmm::Access held;
    ASSERT_EQ(pager_->prepare_range(reservation_ + 4 * kMiB, 2 * kMiB, nullptr, false, held), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyDtoH(through_whole.data(), reservation_ + 4 * kMiB, 2 * kMiB), CUDA_SUCCESS);
  }
  EXPECT_EQ(through_whole, expected) << "the bytes written through the offset mapping";
  EXPECT_GE(pager_->summary()["offloads"].get<int>(), 1);
  EXPECT_EQ(pager_->unmap_program_range(reservation_, 6 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(pager_->unmap_program_range(reservation_ + 16 * kMiB, 2 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(pager_->release_handle(handle), CUDA_SUCCESS);
  CUresult result = CUDA_SUCCESS;
  for (CUdeviceptr p : others) {
    EXPECT_TRUE(pager_->free(p, &result));
    EXPECT_EQ(result, CUDA_SUCCESS);
  }
}

// Four threads at once, each with its own stretch of one reservation:
// create, map apart, grant, write, read back (offloading one another's
// handles under the cap), unmap and release, round after round. Every byte
// comes back; under ThreadSanitizer, no race.
TEST_F(ProgramHandlesTest, ConcurrentThreadsMapWriteAndUnmapTheirOwnHandles) {
  make_pager(12 * kMiB);
  reserve(256 * kMiB);
  constexpr int kThreads = 4, kRounds = 6, kHandles = 3;
  std::atomic<int> lost{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      CUcontext context = nullptr;  // each thread makes the device's context current, as a program's would
      if (cuDevicePrimaryCtxRetain(&context, 0) != CUDA_SUCCESS || cuCtxSetCurrent(context) != CUDA_SUCCESS) {
        failed.fetch_add(1);
        return;
      }
      const CUdeviceptr stretch = reservation_ + static_cast<CUdeviceptr>(t) * 64 * kMiB;
      const CUmemAllocationProp prop = device_prop();
      const CUmemAccessDesc access = read_write();
      for (int round = 0; round < kRounds; ++round) {
        CUmemGenericAllocationHandle handles[kHandles] = {};
        for (int h = 0; h < kHandles; ++h) {
          const CUdeviceptr at = stretch + static_cast<CUdeviceptr>(h) * 8 * kMiB;  // a gap after each
          if (pager_->create_handle(0, 2 * kMiB, prop, &handles[h]) != CUDA_SUCCESS ||
              pager_->map_handle(at, 2 * kMiB, 0, handles[h], 0) != CUDA_SUCCESS ||
              pager_->set_program_access(at, 2 * kMiB, &access, 1) != CUDA_SUCCESS) {
            failed.fetch_add(1);
            return;
          }
          std::vector<unsigned char> data(2 * kMiB, static_cast<unsigned char>(t * 16 + round * 4 + h));
          vmm::Access held;
          if (pager_->prepare_range(at, data.size(), nullptr, false, held) != CUDA_SUCCESS ||
              cuMemcpyHtoD(at, data.data(), data.size()) != CUDA_SUCCESS) {
            failed.fetch_add(1);
          }
        }
        for (int h = 0; h < kHandles; ++h) {
          const CUdeviceptr at = stretch + static_cast<CUdeviceptr>(h) * 8 * kMiB;
          std::vector<unsigned char> back(2 * kMiB);
          {
            vmm::Access held;
            if (pager_->prepare_range(at, back.size(), nullptr, false, held) != CUDA_SUCCESS ||
                cuMemcpyDtoH(back.data(), at, back.size()) != CUDA_SUCCESS) {
              failed.fetch_add(1);
            }
          }
          const auto expected = static_cast<unsigned char>(t * 16 + round * 4 + h);
          if (std::any_of(back.begin(), back.end(), [expected](unsigned char b) { return b != expected; })) {
            lost.fetch_add(1);
          }
          if (pager_->unmap_program_range(at, 2 * kMiB) != CUDA_SUCCESS ||
              pager_->release_handle(handles[h]) != CUDA_SUCCESS) {
            failed.fetch_add(1);
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(lost.load(), 0);
  EXPECT_GT(pager_->summary()["offloads"].get<int>(), 0) << "24 MiB at once under a 12 MiB cap";
  EXPECT_EQ(program_handles()["live"].get<int>(), 0);
  EXPECT_LE(ledger_->usage(0).peak, 12 * kMiB);
  EXPECT_EQ(pager_->free_program_reservation(reservation_, reserved_), CUDA_SUCCESS);
}

}  // namespace
}  // namespace vgpumem::test
