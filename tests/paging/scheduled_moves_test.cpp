// The scheduler's interface to the pager (vmm/pager_control.h) on the
// simulated driver: units offloaded and prefetched at arbitrary moments,
// between asynchronous writes on a program stream, never lose a byte. A
// plan can be early, late or wrong; the data must not care.
#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "pager_fixture.h"
#include <nlohmann/json.hpp>

#include "vmm/access_feed.h"
#include "vmm/move_pieces.h"

namespace vgpumem::test {
namespace {

class ScheduledMovesTest : public PagerTest {
 protected:
  void first_of_three_on_host(UnitCatcher& catcher, std::array<CUdeviceptr, 3>& buffers,
                              std::vector<vmm::Unit*>* units);
  // Holds the other two in `held`, as a launch between its settle and its enqueue does.
  void hold_the_other_two(const std::array<CUdeviceptr, 3>& buffers, vmm::Access& held) {
    ASSERT_EQ(pager_->prepare_range(buffers[1], kChunk, nullptr, false, held), CUDA_SUCCESS);
    ASSERT_EQ(pager_->prepare_range(buffers[2], kChunk, nullptr, false, held), CUDA_SUCCESS);
  }
};

// Units by buffer, caught from `feed` (anything with a `last`: the first
// unit of the last operation it heard of) as each is touched once more.
template <typename Feed>
std::vector<vmm::Unit*> units_of(vmm::Pager& pager, Feed& feed, std::span<const CUdeviceptr> buffers,
                                 std::uint64_t bytes = kChunk) {
  std::vector<vmm::Unit*> units;
  for (const CUdeviceptr p : buffers) {
    vmm::Access access;
    EXPECT_EQ(pager.prepare_range(p, bytes, nullptr, false, access), CUDA_SUCCESS);
    access.release();
    EXPECT_NE(feed.last, nullptr);
    units.push_back(feed.last);
  }
  return units;
}

// `count` page-locked host buffers of `bytes` (the caller frees them with
// cuMemFreeHost).
std::vector<unsigned char*> pinned_buffers(unsigned count, std::uint64_t bytes) {
  std::vector<unsigned char*> buffers;
  for (unsigned i = 0; i < count; ++i) {
    void* p = nullptr;
    EXPECT_EQ(cuMemAllocHost(&p, bytes), CUDA_SUCCESS);
    buffers.push_back(static_cast<unsigned char*>(p));
  }
  return buffers;
}

TEST_F(ScheduledMovesTest, MovesAtAnyMomentBetweenAsynchronousWritesLoseNothing) {
  constexpr std::uint64_t kBytes = kChunk;
  constexpr unsigned kBuffers = 12;  // three times the cap
  make_pager(4 * kChunk);
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);

  std::array<CUdeviceptr, kBuffers> buffers{};
  std::array<unsigned, kBuffers> version{};
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kBytes));
  const std::vector<vmm::Unit*> units = units_of(*pager_, catcher, buffers, kBytes);
  ASSERT_EQ(std::count(units.begin(), units.end(), nullptr), 0);
  for (unsigned i = 0; i < kBuffers; ++i) version[i] = i;

  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  // Pinned sources, reused once the stream has drained: the copies read
  // them when they run, not when they are issued.
  constexpr unsigned kSources = 8;
  const std::vector<unsigned char*> sources = pinned_buffers(kSources, kBytes);

  std::mt19937 random(2026);
  unsigned next_source = 0, writes = 0, moves = 0, checks = 0;
  for (int step = 0; step < 600; ++step) {
    const unsigned i = random() % kBuffers;
    switch (random() % 4) {
      case 0: {  // an asynchronous write of a new version, as a kernel would
        if (next_source == kSources) {
          ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
          next_source = 0;
        }
        version[i] += kBuffers;
        unsigned char* source = sources[next_source++];
        fill_pattern(source, kBytes, version[i]);
        vmm::Access access;
        ASSERT_EQ(pager_->prepare_range(buffers[i], kBytes, stream, false, access), CUDA_SUCCESS);
        ASSERT_EQ(cuMemcpyHtoDAsync(buffers[i], source, kBytes, stream), CUDA_SUCCESS);
        ++writes;
        break;
      }
      case 1:
        moves += pager_->offload_unit(units[i], false) ? 1 : 0;
        break;
      case 2:
        moves += pager_->prefetch_unit(units[i]) ? 1 : 0;
        break;
      default:  // the program looks (synchronously, as cuMemcpyDtoH does)
        ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
        next_source = 0;
        EXPECT_TRUE(holds(buffers[i], kBytes, version[i])) << "buffer " << i << " at step " << step;
        ++checks;
        break;
    }
    EXPECT_LE(physical_bytes_now() - baseline_, cap_) << "the simulator's own count, step " << step;
  }
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  for (unsigned i = 0; i < kBuffers; ++i) EXPECT_TRUE(holds(buffers[i], kBytes, version[i])) << "buffer " << i;
  EXPECT_GT(writes, 100u);
  EXPECT_GT(moves, 100u) << "the scheduled moves must actually happen for this test to mean anything";
  EXPECT_GT(checks, 100u);
  pager_->set_access_feed(nullptr);
  for (auto* source : sources) cuMemFreeHost(source);
  cuStreamDestroy(stream);
}

// Moves made by the feed as it hears of each operation, as the scheduler's
// triggers are: the operation just enqueued (its holds dropped) may lose
// its own units at once, to a save that must wait for it. Asynchronous
// writes, copies between units and reads into pinned memory, each followed
// by random offloads (of its own units too) and prefetches: every byte
// each reads or keeps is the one it should.
class RandomMovesAsFed final : public vmm::AccessFeed {
 public:
  explicit RandomMovesAsFed(vmm::Pager& pager) : pager_(pager) {}
  bool accessed(const vmm::AccessRecord& record) noexcept override {
    last = record.count > 0 ? record.units[0] : nullptr;
    if (!armed) return false;
    for (int k = 0; k < 3; ++k) {
      switch (random_() % 4) {
        case 0:  // one of the operation's own, right behind it
          if (record.count > 0) moves += pager_.offload_unit(record.units[random_() % record.count], false) ? 1 : 0;
          own += 1;
          break;
        case 1: moves += pager_.offload_unit(units[random_() % units.size()], false) ? 1 : 0; break;
        case 2: moves += pager_.prefetch_unit(units[random_() % units.size()]) ? 1 : 0; break;
        default: break;
      }
    }
    return false;
  }
  vmm::Unit* last = nullptr;
  std::vector<vmm::Unit*> units;  // what it may move besides the operation's own (armed: not empty)
  bool armed = false;
  unsigned moves = 0, own = 0;

 private:
  vmm::Pager& pager_;
  std::mt19937 random_{1128};
};

TEST_F(ScheduledMovesTest, MovesAsEachOperationIsEnqueuedLoseNothing) {
  constexpr std::uint64_t kBytes = 2 * kChunk;
  constexpr unsigned kBuffers = 10;  // two and a half times the cap
  make_pager(8 * kChunk, std::nullopt, [](vmm::PagerOptions& options) { options.grace_operations = 0; });
  RandomMovesAsFed feed(*pager_);
  pager_->set_access_feed(&feed);
  std::array<CUdeviceptr, kBuffers> buffers{};
  std::array<unsigned, kBuffers> version{};
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kBytes));
  feed.units = units_of(*pager_, feed, buffers, kBytes);
  for (unsigned i = 0; i < kBuffers; ++i) version[i] = i;
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  // Pinned sources and read-backs, reused once the stream has drained.
  constexpr unsigned kSlots = 6;
  const std::vector<unsigned char*> slots = pinned_buffers(kSlots, kBytes);
  struct Read {
    unsigned char* into;
    unsigned expected;
  };
  std::vector<Read> reads;
  unsigned next_slot = 0, writes = 0, copies = 0, checked = 0;
  const auto drain = [&] {
    ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
    for (const Read& read : reads) {
      EXPECT_TRUE(has_pattern(read.into, kBytes, read.expected))
          << "a read enqueued before its unit went out saw other bytes (version " << read.expected << ")";
      ++checked;
    }
    reads.clear();
    next_slot = 0;
  };
  std::mt19937 random(2811);
  feed.armed = true;
  for (int step = 0; step < 300; ++step) {
    if (next_slot == kSlots) {
      ASSERT_NO_FATAL_FAILURE(drain());
    }
    const unsigned i = random() % kBuffers, j = (i + 1 + random() % (kBuffers - 1)) % kBuffers;
    vmm::Access access;
    switch (random() % 3) {
      case 0: {  // a write of a new version
        version[i] += kBuffers;
        unsigned char* source = slots[next_slot++];
        fill_pattern(source, kBytes, version[i]);
        ASSERT_EQ(pager_->prepare_range(buffers[i], kBytes, stream, false, access), CUDA_SUCCESS);
        ASSERT_EQ(cuMemcpyHtoDAsync(buffers[i], source, kBytes, stream), CUDA_SUCCESS);
        ++writes;
        break;
      }
      case 1:  // i into j, as a kernel reading one unit and writing another
        ASSERT_EQ(pager_->prepare_range(buffers[i], kBytes, stream, false, access), CUDA_SUCCESS);
        ASSERT_EQ(pager_->prepare_range(buffers[j], kBytes, stream, false, access), CUDA_SUCCESS);
        ASSERT_EQ(cuMemcpyDtoDAsync(buffers[j], buffers[i], kBytes, stream), CUDA_SUCCESS);
        version[j] = version[i];
        ++copies;
        break;
      default: {  // a read into pinned memory, looked at once the stream drains
        unsigned char* into = slots[next_slot++];
        ASSERT_EQ(pager_->prepare_range(buffers[i], kBytes, stream, false, access), CUDA_SUCCESS);
        ASSERT_EQ(cuMemcpyDtoHAsync(into, buffers[i], kBytes, stream), CUDA_SUCCESS);
        reads.push_back({into, version[i]});
        break;
      }
    }
    access.release();  // the feed moves units now
    EXPECT_LE(physical_bytes_now() - baseline_, cap_) << "the simulator's own count, step " << step;
  }
  ASSERT_NO_FATAL_FAILURE(drain());
  feed.armed = false;
  for (unsigned i = 0; i < kBuffers; ++i) EXPECT_TRUE(holds(buffers[i], kBytes, version[i])) << "buffer " << i;
  EXPECT_GT(writes, 60u);
  EXPECT_GT(copies, 60u);
  EXPECT_GT(checked, 60u);
  EXPECT_GT(feed.moves, 200u) << "the moves must happen for this test to mean anything";
  EXPECT_GT(feed.own, 120u);
  pager_->set_access_feed(nullptr);
  for (auto* slot : slots) cuMemFreeHost(slot);
  cuStreamDestroy(stream);
}

TEST_F(ScheduledMovesTest, APrefetchedUnitFreedBeforeItsUseIsNotWrittenAfterItsChunksAreReused) {
  make_pager(2 * kChunk);
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);
  std::array<CUdeviceptr, 3> buffers{};
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kChunk));
  vmm::Access access;
  ASSERT_EQ(pager_->prepare_range(buffers[0], kChunk, nullptr, false, access), CUDA_SUCCESS);
  access.release();
  vmm::Unit* first = catcher.last;
  for (const CUdeviceptr other : {buffers[1], buffers[2]}) {  // past its launch grace
    vmm::Access next;
    ASSERT_EQ(pager_->prepare_range(other, kChunk, nullptr, false, next), CUDA_SUCCESS);
  }
  ASSERT_FALSE(pager_->facts(first).resident) << "three chunks under a cap of two: the first went out";
  ASSERT_TRUE(pager_->prefetch_unit(first));  // its copy back is queued
  CUresult freed = CUDA_SUCCESS;
  ASSERT_TRUE(pager_->free(buffers[0], &freed));
  ASSERT_EQ(freed, CUDA_SUCCESS);
  CUdeviceptr reused = 0;
  ASSERT_EQ(pager_->allocate(0, kChunk, &reused), CUDA_SUCCESS);
  write(reused, kChunk, 77);
  EXPECT_TRUE(holds(reused, kChunk, 77)) << "the late copy of a freed unit landed on its successor";
  EXPECT_FALSE(pager_->prefetch_unit(first)) << "a freed unit is never brought back";
  pager_->set_access_feed(nullptr);
}

// The launch grace off: a unit may go the moment its last user is issued.
void without_grace(vmm::PagerOptions& options) { options.grace_operations = 0; }

// A pager under a cap of two chunks, without the grace, and three written
// chunk-sized buffers, caught by `catcher` as each is named once more in
// order: the first is then on the host, the other two resident.
void ScheduledMovesTest::first_of_three_on_host(UnitCatcher& catcher, std::array<CUdeviceptr, 3>& buffers,
                                                std::vector<vmm::Unit*>* units) {
  make_pager(2 * kChunk, std::nullopt, without_grace);
  pager_->set_access_feed(&catcher);
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kChunk));
  *units = units_of(*pager_, catcher, buffers);
  ASSERT_FALSE(pager_->facts((*units)[0]).resident);
}

// The reclaimer off: it would wait for saves and reads on its own thread
// and make the simulator run them early, which these tests must control.
void without_grace_or_reclaimer(vmm::PagerOptions& options) {
  options.grace_operations = 0;
  options.reclaimer = false;
}

// Saves queue on the copy-out engine; a prefetch given the chunks of the
// last one must not overwrite them before that save has read them.
TEST_F(ScheduledMovesTest, APrefetchIntoChunksStillBeingSavedWaitsForTheSave) {
  make_pager(4 * kChunk, std::nullopt, without_grace);
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);
  std::array<CUdeviceptr, 6> buffers{};
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kChunk));
  // Touched in this order, 0 and 1 go out again; 2..5 stay, 5 last named.
  const std::vector<vmm::Unit*> units = units_of(*pager_, catcher, buffers);
  for (int i : {2, 3, 4}) ASSERT_TRUE(pager_->offload_unit(units[i], false)) << i;  // three saves queue
  ASSERT_FALSE(pager_->facts(units[0]).resident);
  ASSERT_TRUE(pager_->prefetch_unit(units[0]));  // takes the last save's chunks
  pager_->set_access_feed(nullptr);
  expect_held(buffers, kChunk);
}

// A unit brought back ahead of its use counts as just used: room made for
// the next prefetch (least recently used first) must not take it, though
// its last use before it went out is the oldest of all. Else a plan whose
// room runs short sends back what it has just fetched, and the use that
// wanted it fetches it again, on demand.
TEST_F(ScheduledMovesTest, RoomForAPrefetchIsNotMadeOfAUnitJustPrefetched) {
  UnitCatcher catcher;
  std::array<CUdeviceptr, 3> buffers{};
  std::vector<vmm::Unit*> units;  // touched in this order: 0 goes out; 1 and 2 stay, 2 last named
  ASSERT_NO_FATAL_FAILURE(first_of_three_on_host(catcher, buffers, &units));
  ASSERT_TRUE(pager_->prefetch_unit(units[0]));  // room: 1, the least recently used
  ASSERT_FALSE(pager_->facts(units[1]).resident);
  ASSERT_TRUE(pager_->prefetch_unit(units[1]));  // room: 2, not 0 that has just come
  EXPECT_TRUE(pager_->facts(units[0]).resident) << "the unit just prefetched went out again";
  EXPECT_FALSE(pager_->facts(units[2]).resident);
  pager_->set_access_feed(nullptr);
  expect_held(buffers, kChunk);
}

// A prefetch that finds no room (everything resident is held by operations
// not yet enqueued) is refused, and the program never hears of it: it is
// no out-of-memory of the program's, and `paging.ooms` says so.
TEST_F(ScheduledMovesTest, APrefetchRefusedForRoomIsNoOutOfMemoryOfTheProgram) {
  UnitCatcher catcher;
  std::array<CUdeviceptr, 3> buffers{};
  std::vector<vmm::Unit*> units;
  ASSERT_NO_FATAL_FAILURE(first_of_three_on_host(catcher, buffers, &units));
  vmm::Access held;
  ASSERT_NO_FATAL_FAILURE(hold_the_other_two(buffers, held));
  EXPECT_FALSE(pager_->prefetch_unit(units[0]));
  const nlohmann::json summary = pager_->summary();
  EXPECT_EQ(summary["ooms"].get<int>(), 0);
  EXPECT_EQ(summary["scheduled_refused"].get<int>(), 1);
  held.release();
  ASSERT_TRUE(pager_->prefetch_unit(units[0])) << "room once the holds are let go";
  pager_->set_access_feed(nullptr);
  expect_held(buffers, kChunk);
}

// The trace's host path (paging.host_path) says why each move the plan
// asked for was refused, and which fetches the program's thread made on
// demand: planned_share is the plan's fetches among all.
TEST_F(ScheduledMovesTest, TheTraceSaysWhyEachRefusedMoveWasRefusedAndWhichFetchesWereOnDemand) {
  UnitCatcher catcher;
  std::array<CUdeviceptr, 3> buffers{};
  std::vector<vmm::Unit*> units;
  ASSERT_NO_FATAL_FAILURE(first_of_three_on_host(catcher, buffers, &units));
  const auto host_path = [&] { return pager_->summary()["host_path"]; };
  const std::uint64_t on_demand_before = host_path()["fetches"]["on_demand"].get<std::uint64_t>();
  EXPECT_FALSE(pager_->offload_unit(units[0], false)) << "on the host already";
  EXPECT_FALSE(pager_->prefetch_unit(units[1])) << "resident already";
  vmm::Access held;
  ASSERT_NO_FATAL_FAILURE(hold_the_other_two(buffers, held));
  EXPECT_FALSE(pager_->prefetch_unit(units[0])) << "no room: the other two are held";
  EXPECT_FALSE(pager_->offload_unit(units[1], false)) << "held by a launch";
  held.release();
  nlohmann::json path = host_path();
  EXPECT_EQ(path["refused"], nlohmann::json({{"elsewhere", 2}, {"no_room", 1}, {"held_by_launch", 1}})) << path.dump();
  EXPECT_EQ(pager_->summary()["scheduled_refused"].get<int>(), 4) << "the reasons add up to the refusals";
  ASSERT_TRUE(pager_->prefetch_unit(units[0]));  // planned; its room was made of units[1], the least recent
  ASSERT_FALSE(pager_->facts(units[1]).resident);
  EXPECT_TRUE(holds(buffers[1], kChunk, 1));  // on demand, on this thread
  path = host_path();
  EXPECT_EQ(path["fetches"]["planned"].get<std::uint64_t>(), 1u);
  EXPECT_EQ(path["fetches"]["on_demand"].get<std::uint64_t>(), on_demand_before + 1);
  EXPECT_DOUBLE_EQ(path["fetches"]["planned_share"].get<double>(), 1.0 / static_cast<double>(on_demand_before + 2));
  const nlohmann::json program = path["program_threads"];
  EXPECT_GT(program["vmm_calls"].get<std::uint64_t>(), 0u) << "this test's thread mapped the fetches on demand";
  EXPECT_GT(program["paging_ns"].get<std::uint64_t>(), 0u);
  EXPECT_TRUE(program["paging_ms_per_gib"].is_number()) << path.dump();
  EXPECT_GT(path["moved_bytes"].get<std::uint64_t>(), 0u);
  pager_->set_access_feed(nullptr);
  expect_held(buffers, kChunk);
}

// A planned fetch's first use: the unit is resident, and the program's
// stream has not waited for its arrival. The launch makes the stream wait
// without the pager's lock (the mover may hold it for the driver's calls),
// and the use reads what arrived, not what was there before.
TEST_F(ScheduledMovesTest, APlannedFetchsFirstUseWaitsForItsArrivalWithoutThePagersLock) {
  constexpr std::uint64_t kBytes = 64 * kMiB;  // a copy in that outlasts the driver calls after it
  make_pager(2 * kBytes, std::nullopt, without_grace);
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);
  std::array<CUdeviceptr, 3> buffers{};
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kBytes));
  const std::vector<vmm::Unit*> units = units_of(*pager_, catcher, buffers, kBytes);
  ASSERT_FALSE(pager_->facts(units[0]).resident);
  ASSERT_TRUE(pager_->prefetch_unit(units[0]));
  const std::uint64_t slow_before = pager_->summary()["slow_path_ns"].get<std::uint64_t>();
  // A stream of the program's own that waits for nothing implicitly (the
  // legacy stream would wait for every blocking stream).
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  // The use: a device-to-device copy (the compute engine's, at 1 TB/s: it
  // ends long before 64 MiB cross the link) into memory of the program's
  // own, read back afterwards.
  CUdeviceptr copy = 0;
  ASSERT_EQ(cuMemAlloc(&copy, kBytes), CUDA_SUCCESS);
  std::vector<unsigned char> data(kBytes);
  {
    vmm::Access access;
    ASSERT_EQ(pager_->prepare_range(buffers[0], kBytes, stream, false, access), CUDA_SUCCESS);
    EXPECT_EQ(pager_->summary()["slow_path_ns"].get<std::uint64_t>(), slow_before) << "no slow path, no lock";
    ASSERT_EQ(cuMemcpyDtoDAsync(copy, buffers[0], kBytes, stream), CUDA_SUCCESS);
  }
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(data.data(), copy, kBytes), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(copy), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
  EXPECT_TRUE(has_pattern(data.data(), kBytes, 0)) << "read before the fetch landed";
  EXPECT_GT(pager_->summary()["stalled_operations"].get<std::uint64_t>(), 0u) << "the stream waited for it";
  pager_->set_access_feed(nullptr);
  expect_held(buffers, kBytes);
}

// The program's out-of-memory answer is counted once, where it arose: a
// pin for life that finds no room for its unit is one, not two.
TEST_F(ScheduledMovesTest, APinForLifeRefusedForRoomCountsOneOutOfMemory) {
  UnitCatcher catcher;
  std::array<CUdeviceptr, 3> buffers{};
  std::vector<vmm::Unit*> units;
  ASSERT_NO_FATAL_FAILURE(first_of_three_on_host(catcher, buffers, &units));
  vmm::Access held;
  ASSERT_NO_FATAL_FAILURE(hold_the_other_two(buffers, held));
  const std::uint64_t word = buffers[0];
  EXPECT_EQ(pager_->pin_for_life(&word, 1, vmm::LifetimePin::ipc), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(pager_->summary()["ooms"].get<int>(), 1);
  held.release();
  pager_->set_access_feed(nullptr);
  expect_held(buffers, kChunk);
}

// A prefetch given a chunk whose save is still running, behind none, must
// still wait for that save: here an 8 MiB save outlasts the 2 MiB copy in.
TEST_F(ScheduledMovesTest, APrefetchWaitsForTheSaveOfTheChunkItWasGivenNotOnlyTheLast) {
  make_pager(6 * kChunk, std::nullopt, without_grace);
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);
  CUdeviceptr z = 0, w = 0, x = 0, y = 0;
  vmm::Unit* unit_z = nullptr;
  vmm::Unit* unit_x = nullptr;
  ASSERT_EQ(pager_->allocate(0, kChunk, &z), CUDA_SUCCESS);
  write(z, kChunk, 1);
  unit_z = catcher.last;
  ASSERT_EQ(pager_->allocate(0, kChunk, &w), CUDA_SUCCESS);
  write(w, kChunk, 2);
  ASSERT_EQ(pager_->allocate(0, 4 * kChunk, &x), CUDA_SUCCESS);
  write(x, 4 * kChunk, 3);
  unit_x = catcher.last;
  ASSERT_EQ(pager_->allocate(0, kChunk, &y), CUDA_SUCCESS);  // z, least recently used, goes out
  write(y, kChunk, 4);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_FALSE(pager_->facts(unit_z).resident);
  ASSERT_TRUE(pager_->offload_unit(unit_x, false));   // an 8 MiB save: 152 us on the copy-out engine
  ASSERT_TRUE(pager_->prefetch_unit(unit_z));  // given one of x's chunks: 38 us on the copy-in engine
  pager_->set_access_feed(nullptr);
  EXPECT_TRUE(holds(x, 4 * kChunk, 3)) << "x's save read z's bytes";
  EXPECT_TRUE(holds(z, kChunk, 1));
  EXPECT_TRUE(holds(w, kChunk, 2));
  EXPECT_TRUE(holds(y, kChunk, 4));
}

// A unit still arriving is copied out only once it has arrived.
TEST_F(ScheduledMovesTest, AnOffloadOfAUnitStillArrivingWaitsForItsArrival) {
  make_pager(4 * kChunk, std::nullopt, without_grace);
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);
  std::array<CUdeviceptr, 6> buffers{};
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kChunk));
  const std::vector<vmm::Unit*> units = units_of(*pager_, catcher, buffers);
  for (int i : {2, 3, 5}) ASSERT_TRUE(pager_->offload_unit(units[i], false)) << i;
  // Buffer 5 freed on the host: its pinned buffer is free and read by no
  // copy, so the offload below takes it, and only the unit's own arrival
  // orders that offload's copy.
  CUresult freed = CUDA_SUCCESS;
  ASSERT_TRUE(pager_->free(buffers[5], &freed));
  ASSERT_EQ(freed, CUDA_SUCCESS);
  ASSERT_TRUE(pager_->prefetch_unit(units[0]));
  ASSERT_TRUE(pager_->prefetch_unit(units[1]));  // queued behind the first on the copy-in engine
  ASSERT_TRUE(pager_->offload_unit(units[1], false));   // straight back out
  pager_->set_access_feed(nullptr);
  expect_held(std::span<const CUdeviceptr>(buffers.data(), 5), kChunk);
}

// A unit an operation just named is inside its launch grace: a plan's
// offload takes it only when the plan was made with the grace cut (no plan
// fitted outside it), is counted as such, and never under torture.
TEST_F(ScheduledMovesTest, AnOffloadInsideTheGraceOnlyForAPlanThatCutItAndNeverUnderTorture) {
  for (const vmm::CheckMode check : {vmm::CheckMode::fast, vmm::CheckMode::torture}) {
    make_pager(4 * kChunk, std::nullopt, [check](vmm::PagerOptions& options) {
      options.check = check;
      options.grace = vmm::GraceKind::blanket;
    });
    UnitCatcher catcher;
    pager_->set_access_feed(&catcher);
    std::array<CUdeviceptr, 2> buffers{};
    ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kChunk));
    const std::vector<vmm::Unit*> units = units_of(*pager_, catcher, buffers);  // both just named
    EXPECT_FALSE(pager_->offload_unit(units[0], false)) << "inside its grace";
    const bool torture = check == vmm::CheckMode::torture;
    EXPECT_EQ(pager_->offload_unit(units[0], true), !torture);
    EXPECT_EQ(pager_->facts(units[0]).resident, torture);
    EXPECT_EQ(pager_->summary()["grace"]["planned_inside"].get<std::uint64_t>(), torture ? 0u : 1u);
    pager_->set_access_feed(nullptr);
    expect_held(buffers, kChunk);
  }
}

// A feed that, as it hears of an operation, offloads `unit` (when armed),
// as the scheduler's trigger for a unit's last use does.
class OffloadAsFed final : public vmm::AccessFeed {
 public:
  explicit OffloadAsFed(vmm::Pager& pager) : pager_(pager) {}
  bool accessed(const vmm::AccessRecord& record) noexcept override {
    last = record.count > 0 ? record.units[0] : nullptr;
    if (unit != nullptr) (pager_.offload_unit(unit, false) ? offloaded : refused) += 1;
    return false;
  }
  vmm::Unit* last = nullptr;
  vmm::Unit* unit = nullptr;  // armed: offload it at the next operation heard of
  int offloaded = 0, refused = 0;

 private:
  vmm::Pager& pager_;
};

// An asynchronous write of pattern `seed` into x on `stream`, through the
// pager as a copy hook makes it; the feed hears of it as it is enqueued.
void write_async(vmm::Pager& pager, CUdeviceptr x, std::uint64_t bytes, unsigned seed, CUstream stream,
                 unsigned char* pinned) {
  fill_pattern(pinned, bytes, seed);
  vmm::Access access;
  ASSERT_EQ(pager.prepare_range(x, bytes, stream, false, access), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoDAsync(x, pinned, bytes, stream), CUDA_SUCCESS);
}

// With no grace, a plan's offload of a unit goes as its last use is
// enqueued: the operation's holds are dropped before the feed hears of it,
// and the save waits for that operation (here a 16 MiB write still running
// on the program's stream), so the bytes it wrote are what comes back.
TEST_F(ScheduledMovesTest, AnOffloadAsItsLastUseIsEnqueuedSavesWhatThatUseWrote) {
  make_pager(16 * kChunk, std::nullopt, without_grace_or_reclaimer);
  OffloadAsFed feed(*pager_);
  pager_->set_access_feed(&feed);
  constexpr std::uint64_t kBytes = 8 * kChunk;
  CUdeviceptr x = 0;
  ASSERT_EQ(pager_->allocate(0, kBytes, &x), CUDA_SUCCESS);
  write(x, kBytes, 1);
  vmm::Unit* unit = feed.last;
  ASSERT_NE(unit, nullptr);
  void* pinned = nullptr;
  ASSERT_EQ(cuMemAllocHost(&pinned, kBytes), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  // The stream busy first (a copy into the program's own memory), so that
  // the write runs well after it is enqueued.
  CUdeviceptr busy = 0;
  void* filler = nullptr;
  ASSERT_EQ(cuMemAlloc(&busy, kBytes), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocHost(&filler, kBytes), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoDAsync(busy, filler, kBytes, stream), CUDA_SUCCESS);
  feed.unit = unit;
  ASSERT_NO_FATAL_FAILURE(write_async(*pager_, x, kBytes, 7, stream, static_cast<unsigned char*>(pinned)));
  feed.unit = nullptr;
  EXPECT_EQ(feed.offloaded, 1) << "refused " << feed.refused << ": still held by the operation enqueued";
  EXPECT_FALSE(pager_->facts(unit).resident);
  pager_->set_access_feed(nullptr);
  EXPECT_TRUE(holds(x, kBytes, 7)) << "the save read x before the write enqueued ahead of it";
  ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeHost(filler), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(busy), CUDA_SUCCESS);
}

// With a grace of K, the unit an operation named may go as the K-th
// operation after it on its stream is enqueued (the grace guards the ones
// not yet prepared), not as the one before; on another stream's operation
// the grace still counts its own stream's.
TEST_F(ScheduledMovesTest, UnderAGraceOfKAnOffloadGoesAsTheKthOperationAfterItsUseIsEnqueued) {
  make_pager(16 * kChunk, std::nullopt, [](vmm::PagerOptions& options) {
    options.grace_operations = 2;
    options.grace = vmm::GraceKind::blanket;
    options.reclaimer = false;
  });
  OffloadAsFed feed(*pager_);
  pager_->set_access_feed(&feed);
  std::array<CUdeviceptr, 3> buffers{};
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kChunk));
  void* pinned = nullptr;
  ASSERT_EQ(cuMemAllocHost(&pinned, 3 * kChunk), CUDA_SUCCESS);
  auto* bytes = static_cast<unsigned char*>(pinned);
  CUstream stream = nullptr, other = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_NO_FATAL_FAILURE(write_async(*pager_, buffers[0], kChunk, 0, stream, bytes));  // x named
  vmm::Unit* x = feed.last;
  feed.unit = x;
  ASSERT_NO_FATAL_FAILURE(write_async(*pager_, buffers[1], kChunk, 1, stream, bytes + kChunk));  // 1st after
  EXPECT_EQ(feed.refused, 1) << "the next operation may still read x through a table";
  ASSERT_NO_FATAL_FAILURE(write_async(*pager_, buffers[2], kChunk, 2, other, bytes + 2 * kChunk));
  EXPECT_EQ(feed.refused, 2) << "another stream's operation is not x's stream's second";
  ASSERT_NO_FATAL_FAILURE(write_async(*pager_, buffers[2], kChunk, 2, stream, bytes + 2 * kChunk));  // 2nd after
  feed.unit = nullptr;
  EXPECT_EQ(feed.offloaded, 1);
  EXPECT_FALSE(pager_->facts(x).resident);
  pager_->set_access_feed(nullptr);
  expect_held(buffers, kChunk);
  ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamDestroy(other), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);
}

// A unit brought in by a prefetch and sent out again before that copy in
// has landed (a plan that moves it out early, or room made for another),
// then wanted back before its save ends, is revived on its chunks with no
// copy: the stream that uses it must still wait for the copy in writing
// them. Here the copy-in engine is busy for 300 us with the program's own
// copy, so the prefetch lands long after the copy that reads the unit next
// is issued; the chunks held another buffer's bytes before.
TEST_F(ScheduledMovesTest, AUnitRevivedBeforeItsCopyInLandedIsReadOnlyOnceItHas) {
  for (const vmm::CheckMode check : {vmm::CheckMode::fast, vmm::CheckMode::strict}) {
    make_pager(8 * kChunk, std::nullopt, [check](vmm::PagerOptions& options) {
      options.check = check;
      options.grace_operations = 0;
      options.reclaimer = false;
    });
    UnitCatcher catcher;
    pager_->set_access_feed(&catcher);
    constexpr std::uint64_t kBytes = 2 * kChunk;
    CUdeviceptr u = 0, other = 0, copy = 0;
    ASSERT_EQ(pager_->allocate(0, kBytes, &u), CUDA_SUCCESS);
    write(u, kBytes, 5);
    vmm::Unit* unit = catcher.last;
    ASSERT_TRUE(pager_->offload_unit(unit, false));
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    // Another buffer on the chunks u left, then freed: they hold its bytes.
    ASSERT_EQ(pager_->allocate(0, kBytes, &other), CUDA_SUCCESS);
    write(other, kBytes, 9);
    CUresult freed = CUDA_SUCCESS;
    ASSERT_TRUE(pager_->free(other, &freed));
    ASSERT_EQ(pager_->allocate(0, kBytes, &copy), CUDA_SUCCESS);
    write(copy, kBytes, 1);
    CUdeviceptr busy = 0;
    void* filler = nullptr;
    ASSERT_EQ(cuMemAlloc(&busy, 8 * kChunk), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAllocHost(&filler, 8 * kChunk), CUDA_SUCCESS);
    CUstream program = nullptr, elsewhere = nullptr;
    ASSERT_EQ(cuStreamCreate(&program, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&elsewhere, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyHtoDAsync(busy, filler, 8 * kChunk, elsewhere), CUDA_SUCCESS);  // the copy-in engine, busy
    ASSERT_TRUE(pager_->prefetch_unit(unit));     // queued behind it
    ASSERT_TRUE(pager_->offload_unit(unit, false));  // its save waits for that copy in
    const std::uint64_t revived = pager_->summary()["revived"].get<std::uint64_t>();
    {
      vmm::Access access;
      ASSERT_EQ(pager_->prepare_range(u, kBytes, program, false, access), CUDA_SUCCESS);
      ASSERT_EQ(pager_->prepare_range(copy, kBytes, program, false, access), CUDA_SUCCESS);
      ASSERT_EQ(cuMemcpyDtoDAsync(copy, u, kBytes, program), CUDA_SUCCESS);
    }
    EXPECT_EQ(pager_->summary()["revived"].get<std::uint64_t>(), revived + 1) << "this test is about a revive";
    ASSERT_EQ(cuStreamSynchronize(program), CUDA_SUCCESS);
    pager_->set_access_feed(nullptr);
    EXPECT_TRUE(holds(copy, kBytes, 5)) << "read before the copy bringing u in had landed (strict: " << (check == vmm::CheckMode::strict) << ")";
    EXPECT_TRUE(holds(u, kBytes, 5));
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamDestroy(program), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamDestroy(elsewhere), CUDA_SUCCESS);
    ASSERT_EQ(cuMemFreeHost(filler), CUDA_SUCCESS);
    ASSERT_EQ(cuMemFree(busy), CUDA_SUCCESS);
  }
}

// A large save goes in pieces, and a unit brought into its room copies each
// piece of its own as soon as the save of the chunks under it is done. Here
// the copy-out engine is busy with a copy of the program's for 152 us first
// (8 MiB), so each piece of the 16 MiB save (152 us a piece) ends 152 us
// later than the copy-in engine could write over it: a piece of the fetch
// not ordered after the save of its chunks lands on them first, and the
// save reads the wrong bytes. Ordered piece by piece, the fetch ends at
// 610 us; ordered after the whole save, at 762.
TEST_F(ScheduledMovesTest, AFetchIntoTheRoomOfALargeSaveFollowsItPieceByPiece) {
  // What the host waits for, on the simulated clock: under the idle cost model,
  // which charges no host time for the driver calls around it.
  ASSERT_EQ(vgpusimSetCostModel("idle"), CUDA_SUCCESS);

  make_pager(8 * kChunk, std::nullopt, without_grace_or_reclaimer);
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);
  CUdeviceptr x = 0, y = 0, busy = 0;
  ASSERT_EQ(pager_->allocate(0, 8 * kChunk, &y), CUDA_SUCCESS);
  write(y, 8 * kChunk, 5);
  vmm::Unit* unit_y = catcher.last;
  ASSERT_EQ(pager_->allocate(0, 8 * kChunk, &x), CUDA_SUCCESS);  // y goes out to make room
  write(x, 8 * kChunk, 3);
  vmm::Unit* unit_x = catcher.last;
  ASSERT_EQ(cuMemAlloc(&busy, 4 * kChunk), CUDA_SUCCESS);  // the program's own, outside the pager
  void* pinned = nullptr;
  ASSERT_EQ(cuMemAllocHost(&pinned, 4 * kChunk), CUDA_SUCCESS);
  CUstream program = nullptr;
  ASSERT_EQ(cuStreamCreate(&program, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_FALSE(pager_->facts(unit_y).resident);
  const unsigned long long issued = vgpusimHostTimeNs();
  ASSERT_EQ(cuMemcpyDtoHAsync(pinned, busy, 4 * kChunk, program), CUDA_SUCCESS);
  ASSERT_TRUE(pager_->offload_unit(unit_x, false));  // two pieces of 8 MiB, behind the program's copy
  ASSERT_TRUE(pager_->prefetch_unit(unit_y));        // into x's chunks, the first piece's first
  ASSERT_NE(unit_y->ready, nullptr);
  ASSERT_EQ(cuEventSynchronize(unit_y->ready), CUDA_SUCCESS);
  const unsigned long long arrived = vgpusimHostTimeNs();
  EXPECT_LT(arrived - issued, 690'000u) << "the fetch waited for the whole save before its first piece";
  EXPECT_GT(arrived - issued, 530'000u) << "the fetch did not wait for the save of its chunks";
  pager_->set_access_feed(nullptr);
  EXPECT_TRUE(holds(x, 8 * kChunk, 3)) << "a piece of y landed on x's chunks before x's save read them";
  EXPECT_TRUE(holds(y, 8 * kChunk, 5));
  ASSERT_EQ(cuStreamDestroy(program), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(busy), CUDA_SUCCESS);
}

// Saves run in turn on the copy-out stream: a move that looks for finished
// saves stops at the first still running. Asking every save in flight
// (each query a driver call: a microsecond of the simulated host's time
// when not ready) made a move cost more the more saves were queued.
TEST_F(ScheduledMovesTest, AMoveDoesNotAskEverySaveInFlightWhetherItIsDone) {
  // What the host waits for, on the simulated clock: under the idle cost model,
  // which charges no host time for the driver calls around it.
  ASSERT_EQ(vgpusimSetCostModel("idle"), CUDA_SUCCESS);

  constexpr unsigned kQueued = 30;
  make_pager((kQueued + 4) * kChunk, std::nullopt, without_grace_or_reclaimer);
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);
  std::array<CUdeviceptr, kQueued + 1> buffers{};
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kChunk));
  const std::vector<vmm::Unit*> units = units_of(*pager_, catcher, buffers);
  for (unsigned i = 0; i < kQueued; ++i) ASSERT_TRUE(pager_->offload_unit(units[i], false)) << i;
  const unsigned long long before = vgpusimHostTimeNs();
  ASSERT_TRUE(pager_->offload_unit(units[kQueued], false));
  EXPECT_LT(vgpusimHostTimeNs() - before, 5'000u) << kQueued << " saves in flight were each asked";
  pager_->set_access_feed(nullptr);
  expect_held(buffers, kChunk);
}

// A unit that came back gives its host buffer to the store while the copy
// that reads it is still queued (here behind an 8 MiB prefetch). The next
// save to take that buffer must wait for that read, or the read copies the
// save's bytes in instead of the unit's.
TEST_F(ScheduledMovesTest, ASaveIntoAHostBufferAPrefetchStillReadsWaitsForThatRead) {
  make_pager(6 * kChunk, std::nullopt, without_grace_or_reclaimer);
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);
  CUdeviceptr large = 0;
  ASSERT_EQ(pager_->allocate(0, 4 * kChunk, &large), CUDA_SUCCESS);
  write(large, 4 * kChunk, 9);
  std::array<CUdeviceptr, 2> buffers{};  // a, b
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kChunk));
  const std::vector<vmm::Unit*> units = units_of(*pager_, catcher, std::array<CUdeviceptr, 3>{large, buffers[0], buffers[1]});
  ASSERT_TRUE(pager_->offload_unit(units[0], false));
  ASSERT_TRUE(pager_->offload_unit(units[1], false));
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);  // both saved: each comes back by a copy, not revived
  ASSERT_TRUE(pager_->prefetch_unit(units[0]));  // 152 us on the copy-in engine
  ASSERT_TRUE(pager_->prefetch_unit(units[1]));  // behind it: reads a's host buffer from 152 us on
  ASSERT_TRUE(pager_->offload_unit(units[2], false));   // b's save, into the only free 2 MiB buffer: a's
  pager_->set_access_feed(nullptr);
  EXPECT_TRUE(holds(buffers[0], kChunk, 0)) << "a came back with b's bytes: its read ran after b's save";
  EXPECT_TRUE(holds(buffers[1], kChunk, 1));
  EXPECT_TRUE(holds(large, 4 * kChunk, 9));
}

// A save into a host buffer whose read is done waits for nothing on the
// copy-in stream: not for a long prefetch queued there since. (Ordering
// saves after the whole copy-in stream made the copy-out engine idle behind
// the copy-in engine on every link-bound step.)
TEST_F(ScheduledMovesTest, ASaveWaitsOnlyForTheReadOfItsOwnHostBuffer) {
  make_pager(7 * kChunk, std::nullopt, without_grace_or_reclaimer);
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);
  CUdeviceptr large = 0;
  ASSERT_EQ(pager_->allocate(0, 4 * kChunk, &large), CUDA_SUCCESS);
  write(large, 4 * kChunk, 9);
  std::array<CUdeviceptr, 3> buffers{};  // a, b, c
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kChunk));
  const std::vector<vmm::Unit*> units =
      units_of(*pager_, catcher, std::array<CUdeviceptr, 4>{large, buffers[0], buffers[1], buffers[2]});
  ASSERT_TRUE(pager_->offload_unit(units[1], false));  // a out and back: its host buffer is free, its read done
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_TRUE(pager_->prefetch_unit(units[1]));
  ASSERT_TRUE(pager_->offload_unit(units[0], false));
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_TRUE(pager_->prefetch_unit(units[0]));  // 152 us on the copy-in engine from now
  const unsigned long long issued = vgpusimHostTimeNs();
  ASSERT_TRUE(pager_->offload_unit(units[2], false));  // b's save takes a's buffer
  ASSERT_NE(units[2]->saved, nullptr);
  ASSERT_EQ(cuEventSynchronize(units[2]->saved), CUDA_SUCCESS);
  const unsigned long long saved = vgpusimHostTimeNs();
  EXPECT_LT(saved - issued, 100'000u) << "a 2 MiB save (40 us) waited for the 8 MiB prefetch before it";
  pager_->set_access_feed(nullptr);
  expect_held(buffers, kChunk);
  EXPECT_TRUE(holds(large, 4 * kChunk, 9));
}

}  // namespace
}  // namespace vgpumem::test

namespace vgpumem::test {
namespace {

std::uint64_t revived(const vmm::Pager& pager) { return pager.summary().value("revived", std::uint64_t{0}); }
std::uint64_t copied_in(const vmm::Pager& pager) { return pager.summary().value("bytes_prefetched", std::uint64_t{0}); }

// Wanted back while its save is still running and nothing reused its
// chunks: resident again on them, with no copy in and no wait. (No
// reclaimer: it would wait for the save, which makes the simulator run it,
// and unmap the range before the prefetch comes.)
class RevivalTest : public ScheduledMovesTest {
 protected:
  void expect_revived_with_no_copy(std::uint64_t unit_bytes) {
    make_pager(2 * unit_bytes, std::nullopt, without_grace_or_reclaimer);
    UnitCatcher catcher;
    pager_->set_access_feed(&catcher);
    std::array<CUdeviceptr, 2> buffers{};
    ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, unit_bytes));
    const std::vector<vmm::Unit*> units = units_of(*pager_, catcher, buffers);
    const std::uint64_t before = copied_in(*pager_);
    ASSERT_TRUE(pager_->offload_unit(units[0], false));
    if (unit_bytes > vmm::kMovePieceBytes) {
      ASSERT_LT(units[0]->save_first, units[0]->save_serial) << "saved in one piece";
    }
    ASSERT_TRUE(pager_->prefetch_unit(units[0]));
    EXPECT_EQ(revived(*pager_), 1u);
    EXPECT_EQ(copied_in(*pager_), before) << "no copy in";
    pager_->set_access_feed(nullptr);
    expect_held(buffers, unit_bytes);
  }
};

TEST_F(RevivalTest, AUnitWantedBackBeforeItsSaveEndsIsResidentAgainWithNoCopy) {
  expect_revived_with_no_copy(kChunk);
}

// The same for a unit saved in pieces: its chunks carry each piece's number.
TEST_F(RevivalTest, AUnitSavedInPiecesIsRevivedOnItsChunksToo) { expect_revived_with_no_copy(8 * kChunk); }

// A revived unit's save is left running, and it still reads the unit's
// range: a free right after must not unmap the range under it (an unmap
// while a copy reads the range is a fatal 700 on a GPU, gpu-facts §8.6c;
// the simulator faults the copy). Found by
// MoverTest.RandomMovesAgainstTwoThreadsWritesAndFreesLoseNothing.
TEST_F(RevivalTest, AFreeOfARevivedUnitWaitsForTheSaveStillReadingIt) {
  make_pager(4 * kChunk, std::nullopt, without_grace_or_reclaimer);
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);
  std::array<CUdeviceptr, 2> buffers{};
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, 2 * kChunk));
  const std::vector<vmm::Unit*> units = units_of(*pager_, catcher, buffers, 2 * kChunk);
  pager_->set_access_feed(nullptr);
  ASSERT_TRUE(pager_->offload_unit(units[0], false));
  ASSERT_TRUE(pager_->prefetch_unit(units[0]));
  ASSERT_EQ(revived(*pager_), 1u) << "back on its chunks with its save still running";
  CUresult result = CUDA_ERROR_UNKNOWN;
  ASSERT_TRUE(pager_->free(buffers[0], &result));
  EXPECT_EQ(result, CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS) << "the save read a range already unmapped";
  EXPECT_TRUE(holds(buffers[1], 2 * kChunk, 1));
  ASSERT_TRUE(pager_->free(buffers[1], &result));
}

// A chunk taken by another unit and given back again holds that unit's
// bytes: the first owner must be copied back in, not revived on it.
TEST_F(RevivalTest, AUnitWhoseChunkWasReusedAndGivenBackIsCopiedBackNotRevived) {
  // (No reclaimer: b's save must still be running when b is wanted back.)
  make_pager(2 * kChunk, std::nullopt, without_grace_or_reclaimer);
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);
  std::array<CUdeviceptr, 3> buffers{};  // a, b, c: writing c sent a to the host
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kChunk));
  const std::vector<vmm::Unit*> units = units_of(*pager_, catcher, buffers);
  vmm::Unit* a = units[0];
  vmm::Unit* b = units[1];
  ASSERT_TRUE(pager_->offload_unit(b, false));   // b's save runs; its chunk goes back
  ASSERT_TRUE(pager_->prefetch_unit(a));  // a comes in on b's chunk, after b's save
  ASSERT_TRUE(pager_->offload_unit(a, false));   // and goes out again: the chunk goes back with a's save
  ASSERT_TRUE(pager_->prefetch_unit(b));  // b's chunk is free again, but holds a's bytes
  EXPECT_EQ(revived(*pager_), 0u);
  pager_->set_access_feed(nullptr);
  expect_held(buffers, kChunk);
}

// A feed that times every operation, kernels by launch id while its clock
// is on (Scheduler::times_kernels_by_launch_id), and keeps what it was told.
class TimingFeed final : public vmm::AccessFeed {
 public:
  bool accessed(const vmm::AccessRecord& record) noexcept override {
    started = record.started;
    ended = record.ended;
    launch_id = record.launch_id;
    return true;
  }
  bool times_kernels_by_launch_id() const noexcept override { return clock_on; }
  bool marks_kernel_too(std::uint64_t) noexcept override { return mark_kernels; }
  bool clock_on = true;
  bool mark_kernels = false;
  CUevent started = nullptr, ended = nullptr;
  std::uint64_t launch_id = 0;
};

// Under a kernel clock a timed kernel records no event on the program's
// stream: it is noted for a launch id, which its record carries. A copy has
// no kernel record, so it is marked; with the clock off, so is a kernel.
TEST_F(ScheduledMovesTest, ATimedKernelUnderAKernelClockGetsALaunchIdAndNoMarks) {
  make_pager(4 * kChunk);
  TimingFeed feed;
  pager_->set_access_feed(&feed);
  std::array<CUdeviceptr, 1> buffer{};
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffer, kChunk));
  const auto kernel = reinterpret_cast<CUfunction>(std::uintptr_t{0x1000});  // only its being a kernel matters
  const auto operate = [&](const vmm::Operation& op, std::uint64_t id) {
    vmm::Access access;
    ASSERT_EQ(pager_->prepare_range(buffer[0], kChunk, nullptr, false, access, op), CUDA_SUCCESS);
    if (access.wants_launch_id()) access.set_launch_id(id);
    access.release();
  };
  // The operation just told of carried its two marks: they go back.
  const auto expect_marks_and_give_back = [&] {
    EXPECT_NE(feed.started, nullptr);
    EXPECT_NE(feed.ended, nullptr);
    pager_->release_mark(0, feed.started);
    pager_->release_mark(0, feed.ended);
  };
  ASSERT_NO_FATAL_FAILURE(operate({"cuMemcpyHtoD_v2"}, 0));  // the feed asks to time the next from here on
  ASSERT_NO_FATAL_FAILURE(operate({"cuLaunchKernel", kernel}, 41));
  EXPECT_EQ(feed.launch_id, 41u);
  EXPECT_EQ(feed.started, nullptr);
  EXPECT_EQ(feed.ended, nullptr);

  ASSERT_NO_FATAL_FAILURE(operate({"cuMemcpyHtoD_v2"}, 42));
  EXPECT_EQ(feed.launch_id, 0u) << "a copy has no kernel record";
  expect_marks_and_give_back();

  feed.clock_on = false;  // stepped aside: the next timed kernel is marked
  ASSERT_NO_FATAL_FAILURE(operate({"cuLaunchKernel", kernel}, 43));
  EXPECT_EQ(feed.launch_id, 0u);
  expect_marks_and_give_back();

  // A kernel beside a copy (AccessFeed::marks_kernel_too): its launch id
  // for its duration, and marks for the waits between it and the copy.
  feed.clock_on = true;
  feed.mark_kernels = true;
  ASSERT_NO_FATAL_FAILURE(operate({"cuLaunchKernel", kernel}, 44));
  EXPECT_EQ(feed.launch_id, 44u);
  expect_marks_and_give_back();
  pager_->set_access_feed(nullptr);
}

// A copy names two operands, and the pager settles each on its own, in one
// Access: the operation is timed once, by the mark the first settle
// recorded, and no mark is taken twice. (A second settle that forgot the
// first mark would leak it from the pool, an event per timed copy, and time
// the copy from its second operand.)
TEST_F(ScheduledMovesTest, AnOperationWithTwoOperandsIsTimedByOnePairOfMarks) {
  make_pager(4 * kChunk);
  TimingFeed feed;
  feed.clock_on = false;
  pager_->set_access_feed(&feed);
  std::array<CUdeviceptr, 2> buffers{};
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kChunk));
  std::set<CUevent> marks_seen;
  constexpr int kCopies = 16;
  for (int copy = 0; copy < kCopies; ++copy) {
    vmm::Access access;
    for (const CUdeviceptr operand : buffers) {
      ASSERT_EQ(pager_->prepare_range(operand, kChunk, nullptr, false, access, {"cuMemcpyDtoDAsync_v2"}),
                CUDA_SUCCESS);
    }
    access.release();
    if (copy == 0) continue;  // the feed asks to time the next from here on
    ASSERT_NE(feed.started, nullptr);
    ASSERT_NE(feed.ended, nullptr);
    marks_seen.insert(feed.started);
    marks_seen.insert(feed.ended);
    pager_->release_mark(0, feed.started);
    pager_->release_mark(0, feed.ended);
  }
  EXPECT_LE(marks_seen.size(), 3u) << "every mark given back is taken again: " << marks_seen.size()
                                   << " distinct marks over " << kCopies - 1 << " timed copies";
  pager_->set_access_feed(nullptr);
}

}  // namespace
}  // namespace vgpumem::test
