// The access log on synthetic operation streams: what it records of each
// iteration once the detector has locked, what it drops, and threads.
#include "scheduler/access_log.h"

#include "handoff_thread.h"
#include "vmm/unit.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <thread>
#include <vector>

namespace vgpumem::scheduler {
namespace {

// The slot the launch path keeps for the calling thread (vmm::LaunchThread),
// which every record the pager hands over carries: so these streams take the
// log's inline path, as a program's do. (A record without one, as in
// NothingIsRecordedFromARandomStream, takes the log's own look-up.)
vmm::FeedThreadSlot* launch_slot() {
  thread_local vmm::FeedThreadSlot slot;
  return &slot;
}

// A step of `ops` operations over `units`: operation i touches units i % n
// and (i + 1) % n, identity derived from i (distinct within the step).
struct Step {
  std::vector<vmm::Unit> units;
  std::size_t ops;
  std::uint64_t salt;
  std::uint64_t stream_bit = 1;  // the stream it is issued to (vmm::StreamRegistry's bit)

  Step(std::size_t unit_count, std::size_t op_count, std::uint64_t salt_value)
      : units(unit_count), ops(op_count), salt(salt_value) {}

  std::uint64_t identity(std::size_t i) const { return (i + 1) * 0x9E3779B97F4A7C15ULL ^ salt; }

  void run(AccessLog& log, std::size_t from = 0, std::size_t to = SIZE_MAX) {
    for (std::size_t i = from; i < std::min(to, ops); ++i) op(log, i);
  }
  // Operation `i`, with marks from `marks` where the log asks for timing
  // (as the pager records them), or none.
  void op(AccessLog& log, std::size_t i, vmm::PagerControl* marks = nullptr) {
    std::array<vmm::Unit*, 2> touched{&units[i % units.size()], &units[(i + 1) % units.size()]};
    vmm::AccessRecord record{};
    record.thread_slot = launch_slot();
    record.identity = identity(i);
    record.stream_bit = stream_bit;
    record.api = "cuLaunchKernel";
    record.units = touched.data();
    record.count = touched.size();
    if (marks != nullptr && log.wants_timing(record.stream_bit)) {
      record.started = marks->mark(nullptr);
      record.ended = marks->mark(nullptr);
    }
    log.accessed(record);
  }
};

// Timing marks that are only numbers: what a log with timing needs.
class CountingMarks final : public vmm::PagerControl {
 public:
  bool offload_unit(vmm::Unit*, bool) override { return false; }
  bool prefetch_unit(vmm::Unit*) override { return false; }
  vmm::UnitFacts facts(const vmm::Unit*) const override { return {}; }
  std::uint64_t paging_budget(int) const override { return 0; }
  double link_bytes_per_ns(bool) const override { return 0; }
  CUevent mark(CUstream) override {
    ++out;
    return reinterpret_cast<CUevent>(++made);
  }
  void elapsed_ns(std::span<const vmm::ElapsedQuery>, std::span<std::int64_t> nanoseconds) override {
    std::fill(nanoseconds.begin(), nanoseconds.end(), 0);
  }
  void release_mark(int, CUevent) override { --out; }

  std::uintptr_t made = 0;
  std::int64_t out = 0;
};

TEST(AccessLog, RecordsEachWholeIterationOnceThePeriodLocks) {
  AccessLog log;
  Step step(10, 100, 1);
  for (int i = 0; i < 2; ++i) step.run(log);
  EXPECT_EQ(log.last_iteration(), nullptr) << "the lock completes with the second iteration: nothing recorded yet";
  step.run(log);
  auto recorded = log.last_iteration();
  ASSERT_NE(recorded, nullptr);
  EXPECT_EQ(recorded->serial, 1u);
  ASSERT_EQ(recorded->ops.size(), 100u);
  ASSERT_EQ(recorded->units.size(), 200u);
  for (std::size_t i = 0; i < 100; ++i) {
    const RecordedOp& op = recorded->ops[i];
    EXPECT_EQ(op.identity, step.identity(i)) << "op " << i << ": ops[0] is the iteration's first operation";
    ASSERT_EQ(op.unit_count, 2u);
    EXPECT_EQ(recorded->units[op.first_unit], &step.units[i % 10]);
    EXPECT_EQ(recorded->units[op.first_unit + 1], &step.units[(i + 1) % 10]);
  }
  step.run(log);
  EXPECT_EQ(log.last_iteration()->serial, 2u);
  const nlohmann::json summary = log.summary();
  EXPECT_EQ(summary["period"], 100);
  EXPECT_EQ(summary["iterations_recorded"], 2);
  EXPECT_EQ(summary["locks"], 1);
  EXPECT_EQ(summary["breaks"], 0);
  EXPECT_EQ(summary["locked"], true);
  EXPECT_EQ(summary["operations"], 400);
}

// Every run ends off its step: its last operations (frees, a copy of the
// results, a synchronisation) break the period it held. Less than a step of
// them with no lock after is the run's end, not a break of the step.
TEST(AccessLog, TheRunsEndIsNotABreak) {
  AccessLog log;
  Step train(10, 100, 1), teardown(10, 30, 3), evaluate(10, 200, 2);
  for (int i = 0; i < 4; ++i) train.run(log);
  teardown.run(log);
  nlohmann::json summary = log.summary();
  EXPECT_EQ(summary["locked"], false);
  EXPECT_EQ(summary["breaks"], 0) << summary.dump();
  EXPECT_EQ(summary["breaks_at_end"], 1) << summary.dump();
  // More than a step of something else after it: the step broke.
  evaluate.run(log);
  summary = log.summary();
  EXPECT_EQ(summary["breaks"], 1) << summary.dump();
  EXPECT_EQ(summary["breaks_at_end"], 0) << summary.dump();
}

TEST(AccessLog, AnIterationThatBreaksIsDroppedAndTheNextLockRecordsAgain) {
  AccessLog log;
  Step train(10, 100, 1), evaluate(10, 140, 2);
  for (int i = 0; i < 3; ++i) train.run(log);
  ASSERT_EQ(log.last_iteration()->serial, 1u);
  train.run(log, 0, 50);  // half a step, then an evaluation pass longer than a step
  evaluate.run(log);
  nlohmann::json summary = log.summary();
  EXPECT_EQ(summary["breaks"], 1);
  EXPECT_EQ(summary["dropped_iterations"], 1) << "the half-recorded step";
  EXPECT_EQ(summary["locked"], false);
  EXPECT_EQ(log.last_iteration()->serial, 1u) << "what was published stays";
  train.run(log, 50);  // training resumes with the second half of a step
  for (int i = 0; i < 6; ++i) train.run(log);
  summary = log.summary();
  EXPECT_EQ(summary["locks"], 2);
  EXPECT_EQ(summary["locked"], true);
  EXPECT_EQ(summary["period"], 100);
  auto recorded = log.last_iteration();
  ASSERT_GT(recorded->serial, 1u);
  ASSERT_EQ(recorded->ops.size(), 100u);
  // The iteration now starts where the new lock put it: a rotation of the step.
  const std::size_t shift = static_cast<std::size_t>(
      std::find_if(recorded->ops.begin(), recorded->ops.end(),
                   [&](const RecordedOp& op) { return op.identity == train.identity(0); }) -
      recorded->ops.begin());
  ASSERT_LT(shift, 100u);
  for (std::size_t i = 0; i < 100; ++i) {
    EXPECT_EQ(recorded->ops[(shift + i) % 100].identity, train.identity(i));
  }
}

TEST(AccessLog, AnIterationTooLargeToRecordIsDroppedAndTheNextOneIsRecorded) {
  AccessLog::Options options;
  options.max_units_per_iteration = 150;  // a step names 200
  AccessLog small(options);
  Step step(10, 100, 1);
  for (int i = 0; i < 5; ++i) step.run(small);
  EXPECT_EQ(small.last_iteration(), nullptr);
  EXPECT_EQ(small.summary()["dropped_iterations"], 3);
  EXPECT_EQ(small.summary()["locked"], true) << "the period holds; only the record is missing";

  options.max_units_per_iteration = 200;
  AccessLog exact(options);
  for (int i = 0; i < 5; ++i) step.run(exact);
  ASSERT_NE(exact.last_iteration(), nullptr);
  EXPECT_EQ(exact.summary()["iterations_recorded"], 3);
}

TEST(AccessLog, NothingIsRecordedFromARandomStream) {
  AccessLog log;
  std::vector<vmm::Unit> units(16);
  std::mt19937_64 random(5);
  for (int i = 0; i < 20000; ++i) {
    vmm::Unit* touched = &units[random() % units.size()];
    vmm::AccessRecord record{};
    record.identity = random() % 64;  // few identities: chance runs are common
    record.units = &touched;
    record.count = 1;
    log.accessed(record);
  }
  EXPECT_EQ(log.last_iteration(), nullptr);
  EXPECT_EQ(log.summary()["locks"], 0);
}

TEST(AccessLog, ReadersKeepTheIterationTheyHoldWhileMoreArePublished) {
  AccessLog log;
  Step step(10, 100, 1);
  for (int i = 0; i < 3; ++i) step.run(log);
  auto held = log.last_iteration();
  for (int i = 0; i < 5; ++i) step.run(log);
  EXPECT_EQ(held->serial, 1u);
  EXPECT_EQ(held->ops.size(), 100u) << "a published iteration is never reused while read";
  EXPECT_EQ(held->ops[7].identity, step.identity(7));
  EXPECT_EQ(log.last_iteration()->serial, 6u);
}

// Two threads issuing to two streams at once: each stream has its own log
// and period.
TEST(AccessLog, ConcurrentThreadsOnTwoStreamsEachHaveTheirOwnPeriod) {
  AccessLog log;
  Step a(10, 100, 1), b(6, 70, 2);
  b.stream_bit = 2;
  std::thread first([&] {
    for (int i = 0; i < 20; ++i) a.run(log);
  });
  std::thread second([&] {
    for (int i = 0; i < 10; ++i) b.run(log);
  });
  for (int i = 0; i < 50; ++i) {
    static_cast<void>(log.summary());  // a reader meanwhile
    static_cast<void>(log.last_iteration());
  }
  first.join();
  second.join();
  const nlohmann::json summary = log.summary();
  EXPECT_EQ(summary["streams"], 2);
  EXPECT_EQ(summary["unnamed_threads"], 0);
  EXPECT_EQ(summary["handoffs"], 2) << "each stream's first operation: nothing issued before it";
  EXPECT_EQ(summary["locks"], 2) << "one per stream: the interleaving does not mix them";
  EXPECT_EQ(summary["period"], 100) << "the stream that recorded most";
  EXPECT_EQ(summary["iterations_recorded"], 18 + 8);
  EXPECT_EQ(log.last_iteration()->ops.size(), 100u);
}

// One stream, its operations issued in turn by two threads as PyTorch
// issues a step (forward on the training loop's thread, backward on the
// autograd engine's, handed over and waited for, the optimizer back on the
// first): one sequence, one period, the whole step, recorded whole.
TEST(AccessLog, OneStreamIssuedByTwoThreadsInTurnIsOnePeriodOfTheWholeStep) {
  AccessLog log;
  Step step(10, 100, 1);
  test::HandoffThread autograd;
  constexpr int kSteps = 6;
  for (int i = 0; i < kSteps; ++i) {
    step.run(log, 0, 50);                               // forward and the loss
    autograd.run([&] { step.run(log, 50, 90); });       // backward
    step.run(log, 90);                                  // the optimizer
  }
  const nlohmann::json summary = log.summary();
  EXPECT_EQ(summary["streams"], 1);
  EXPECT_EQ(summary["unnamed_threads"], 0);
  EXPECT_EQ(summary["period"], 100) << "the whole step: " << summary.dump();
  EXPECT_EQ(summary["locks"], 1);
  EXPECT_EQ(summary["breaks"], 0);
  EXPECT_EQ(summary["handoffs"], 1 + 2 * kSteps);
  EXPECT_EQ(summary["operations"], 100 * kSteps);
  const auto recorded = log.last_iteration();
  ASSERT_NE(recorded, nullptr);
  ASSERT_EQ(recorded->ops.size(), 100u) << "both threads' operations, in issue order";
}

// A stream two threads issue to at once (rare, but legal): the log stays
// whole and race-free. An operation issued while the other thread holds
// the stream's log goes unseen (counted), and the period learned meanwhile
// may break for it; nothing else is promised.
TEST(AccessLog, ConcurrentThreadsOnOneStreamAreSafe) {
  AccessLog log;
  Step a(10, 100, 1), b(10, 100, 1);  // the same step, the same stream
  std::thread first([&] {
    for (int i = 0; i < 40; ++i) a.run(log);
  });
  std::thread second([&] {
    for (int i = 0; i < 40; ++i) b.run(log);
  });
  for (int i = 0; i < 50; ++i) {
    static_cast<void>(log.summary());  // readers meanwhile
    static_cast<void>(log.last_iteration());
    static_cast<void>(log.wants_timing(1));
  }
  first.join();
  second.join();
  const nlohmann::json summary = log.summary();
  EXPECT_EQ(summary["streams"], 1);
  EXPECT_EQ(summary["operations"].get<std::uint64_t>() + summary["unseen_operations"].get<std::uint64_t>(),
            2u * 40 * 100)
      << "every operation followed or counted unseen: " << summary.dump();
  if (const auto last = log.last_iteration()) {
    EXPECT_EQ(last->ops.size(), summary["period"].get<std::size_t>());
  }
}

// A log that keeps timed iterations only (the scheduler's: the planner
// reads nothing else) follows the untimed ones without writing them down,
// numbers every iteration, and still times the one request_timing() names.
TEST(AccessLog, WithoutUntimedIterationsOnlyTheTimedArePublishedAndEveryOneIsNumbered) {
  CountingMarks marks;
  AccessLog::Options options;
  options.timing_every = 3;  // the first after the lock, then every fourth
  options.record_untimed = false;
  AccessLog log(options, &marks);
  Step step(10, 100, 0);
  const auto run_timed = [&](std::size_t iterations) {  // as the pager does: marks where the log asks
    for (std::size_t n = 0; n < iterations; ++n) {
      for (std::size_t i = 0; i < step.ops; ++i) step.op(log, i, &marks);
    }
  };
  run_timed(2);  // locks
  std::uint64_t last_serial = 0;
  int published = 0;
  for (std::uint64_t serial = 1; serial <= 12; ++serial) {
    run_timed(1);
    const std::shared_ptr<const RecordedIteration> last = log.last_iteration();
    ASSERT_NE(last, nullptr) << "iteration " << serial;
    EXPECT_TRUE(last->timed) << "iteration " << serial << ": only timed iterations are published";
    ASSERT_EQ(last->ops.size(), step.ops);
    EXPECT_NE(last->ops[0].started, nullptr);
    if (last->serial == last_serial) continue;
    ++published;
    EXPECT_EQ(last->serial, serial) << "numbered among every iteration followed";
    EXPECT_EQ((serial - 1) % 4, 0u) << "the first after the lock, then every fourth";
    last_serial = last->serial;
  }
  EXPECT_EQ(published, 3);
  const nlohmann::json summary = log.summary();
  EXPECT_EQ(summary["iterations_followed"], 12);
  EXPECT_EQ(summary["iterations_recorded"], 3);
  // Out of turn: one whole iteration after the one starting, then the timed one.
  const std::uint64_t wanted = log.request_timing(log.last_iteration()->log, 1);
  EXPECT_EQ(wanted, 12u + 2 + 1);
  run_timed(3);
  EXPECT_EQ(log.last_iteration()->serial, wanted);
  EXPECT_TRUE(log.last_iteration()->timed);
  // Marks out: those of the published iteration and the one started after it.
  EXPECT_LE(marks.out, static_cast<std::int64_t>(2 * 2 * step.ops + 2));
}

// Evaluation after every two training steps, where the evaluation is the
// training step's first operations and its last (the loss read back): the
// training kind's first timed iteration, begun right after its lock, is
// broken by the first evaluation, and every later training step is named a
// few operations in, too late to time its start. So the step after an
// operation that ends a kind never timed is timed on the chance that it
// starts the kind, and kept when the kind is named: the training kind's
// first timed iteration is the step after the first evaluation, whole, from
// its first operation. No mark is lost on the way.
TEST(AccessLog, AKindNamedAFewOperationsInGetsItsFirstTimedIterationFromThatStep) {
  CountingMarks marks;
  AccessLog::Options options;
  options.record_untimed = false;
  AccessLog log(options, &marks);
  Step step(10, 100, 0);
  std::vector<std::size_t> training(step.ops), evaluation;
  for (std::size_t i = 0; i < step.ops; ++i) training[i] = i;
  for (std::size_t i = 0; i < 40; ++i) evaluation.push_back(i);
  evaluation.push_back(step.ops - 1);
  const auto run = [&](const std::vector<std::size_t>& ops) {  // as the pager does: marks where the log asks
    for (const std::size_t i : ops) step.op(log, i, &marks);
  };
  run(training);
  run(training);  // locks
  run(evaluation);  // breaks the first timed iteration
  EXPECT_EQ(log.last_iteration(), nullptr);
  run(training);  // named a few operations in
  const std::shared_ptr<const RecordedIteration> first = log.last_iteration();
  ASSERT_NE(first, nullptr) << log.summary().dump();
  EXPECT_TRUE(first->timed);
  ASSERT_EQ(first->ops.size(), step.ops);
  for (std::size_t i = 0; i < step.ops; ++i) {
    EXPECT_EQ(first->ops[i].identity, step.identity(i)) << "op " << i;
    EXPECT_NE(first->ops[i].started, nullptr) << "op " << i << " timed";
  }
  EXPECT_NE(first->before_first.event, nullptr) << "the wait before the first operation is timed too";
  const nlohmann::json summary = log.summary();
  EXPECT_EQ(summary["kinds"], 1);
  EXPECT_EQ(summary["kind_returns"], 1);
  for (int round = 0; round < 5; ++round) {
    run(training);
    run(evaluation);
    run(training);
  }
  EXPECT_EQ(log.last_iteration()->serial, first->serial) << "timed once: its plan is kept";
  // Marks out: those of the published iteration (held above) and at most a
  // step's more.
  EXPECT_LE(marks.out, static_cast<std::int64_t>(2 * 2 * step.ops + 2));
}

}  // namespace
}  // namespace vgpumem::scheduler
