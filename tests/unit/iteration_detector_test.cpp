// The iteration detector on synthetic streams of execution identities:
// training loops lock on their whole step, and nothing aperiodic locks.
#include "scheduler/iteration_detector.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace vgpumem::scheduler {
namespace {

using Event = IterationDetector::Event;

// `count` identities no other call gives.
std::vector<std::uint64_t> distinct(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<std::uint64_t> out(count);
  for (std::uint64_t& id : out) id = random();
  return out;
}

struct Fed {
  std::uint64_t locked_at = 0, locks = 0, breaks = 0;  // locked_at: observed() when it last locked
};

Fed feed(IterationDetector& detector, const std::vector<std::uint64_t>& stream) {
  Fed fed;
  for (const std::uint64_t id : stream) {
    const Event event = detector.observe(id);
    if (event == Event::locked) {
      ++fed.locks;
      fed.locked_at = detector.observed();
    }
    if (event == Event::broken) ++fed.breaks;
  }
  return fed;
}

std::vector<std::uint64_t> repeat(const std::vector<std::uint64_t>& step, int times) {
  std::vector<std::uint64_t> out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), step.begin(), step.end());
  return out;
}

TEST(IterationDetector, LocksOnATrainingStepAfterTwoIterations) {
  const std::vector<std::uint64_t> step = distinct(300, 1);
  IterationDetector detector;
  const Fed fed = feed(detector, repeat(step, 10));
  ASSERT_TRUE(detector.locked());
  EXPECT_EQ(detector.period(), 300u);
  EXPECT_EQ(fed.locks, 1u);
  EXPECT_EQ(fed.breaks, 0u);
  EXPECT_EQ(fed.locked_at, 600u) << "the second iteration's last identity completes the lock";
  EXPECT_EQ(detector.iterations(), 8u) << "the third to the tenth";
  EXPECT_EQ(detector.phase(), 299u) << "the stream ends with a whole iteration";
}

// The table of last occurrences is a hash table: identities whose slots
// collide must not forget each other. Here the step's first identity shares
// its slot with three others of the step (found by search, as a run's kernel
// addresses may happen to), so a table that keeps one identity a slot has
// forgotten where the first one last was when the second step begins: the
// period is then found one identity late, after the second step, and a run
// of two steps never locks (seen once in ten runs of BERT-large's two-step
// e2e test).
TEST(IterationDetector, IdentitiesSharingASlotStillLockAfterTwoIterations) {
  std::vector<std::uint64_t> step = distinct(300, 11);
  const auto slot = [](std::uint64_t identity) { return (identity * 0x9E3779B97F4A7C15ull) >> 40; };
  // The smallest table (4096 slots, as max_period 300 gives): the low 12 bits.
  std::uint64_t candidate = 1;
  for (std::size_t placed = 0; placed < 3; ++candidate) {
    if ((slot(candidate) & 4095) == (slot(step[0]) & 4095) && candidate != step[0]) {
      step[100 + 50 * placed++] = candidate;
    }
  }
  IterationDetector detector(IterationDetector::Options{.max_period = 300, .min_confirm = 64, .kinds = {}});
  const Fed fed = feed(detector, repeat(step, 2));
  EXPECT_TRUE(detector.locked());
  EXPECT_EQ(fed.locked_at, 600u) << "the second iteration's last identity completes the lock";
}

TEST(IterationDetector, AWarmUpBeforeTheLoopDoesNotMoveThePeriod) {
  std::vector<std::uint64_t> stream = distinct(777, 2);  // model set-up, the first iteration's autotuning
  const std::vector<std::uint64_t> step = distinct(450, 3);
  const std::vector<std::uint64_t> loop = repeat(step, 5);
  stream.insert(stream.end(), loop.begin(), loop.end());
  IterationDetector detector;
  feed(detector, stream);
  ASSERT_TRUE(detector.locked());
  EXPECT_EQ(detector.period(), 450u);
}

TEST(IterationDetector, ARepeatedKernelInsideTheStepIsNotTheStep) {
  // The same identity many times inside one step (an elementwise kernel on
  // one scratch buffer): distances between its occurrences are not periods.
  std::vector<std::uint64_t> step = distinct(200, 4);
  for (std::size_t i = 0; i < step.size(); i += 7) step[i] = 42;
  IterationDetector detector;
  const Fed fed = feed(detector, repeat(step, 6));
  ASSERT_TRUE(detector.locked());
  EXPECT_EQ(detector.period(), 200u);
  EXPECT_EQ(fed.breaks, 0u);
}

TEST(IterationDetector, NothingAperiodicLocks) {
  IterationDetector detector;
  EXPECT_EQ(feed(detector, distinct(100'000, 5)).locks, 0u) << "all distinct";
  std::mt19937_64 random(6);
  std::vector<std::uint64_t> few(100'000);
  for (std::uint64_t& id : few) id = random() % 4;  // four kernels in a random order
  IterationDetector small;
  EXPECT_EQ(feed(small, few).locks, 0u) << "drawn from four identities";
}

TEST(IterationDetector, AnEvaluationStepBreaksTheLockAndTrainingLocksAgain) {
  const std::vector<std::uint64_t> step = distinct(250, 7), evaluation = distinct(400, 8);
  IterationDetector detector;
  Fed fed = feed(detector, repeat(step, 6));
  ASSERT_TRUE(detector.locked());
  fed = feed(detector, evaluation);
  EXPECT_EQ(fed.breaks, 1u);
  EXPECT_FALSE(detector.locked());
  fed = feed(detector, repeat(step, 4));
  ASSERT_TRUE(detector.locked());
  EXPECT_EQ(detector.period(), 250u);
  EXPECT_EQ(detector.breaks(), 1u);
}

// A kernel whose parameters change for good mid-run (a learning-rate
// schedule's new value passed by value) breaks the lock; the step is the
// same length, and every identity after the change last occurred one
// period back, so the lock is back one period after the break. That needs
// the table of last occurrences to be current at the break although the
// locked detector does not keep it: were it left as the lock found it, each
// identity would look a dozen periods old, and the lock would take two.
// (The identities after the change are the old step's: the old kind is
// recognised from them at once, and the step as changed, found whole a
// period later, takes over from it without a second break.)
TEST(IterationDetector, AParameterChangedForGoodRelocksWithinOnePeriod) {
  std::vector<std::uint64_t> step = distinct(250, 13);
  IterationDetector detector;
  feed(detector, repeat(step, 12));
  ASSERT_TRUE(detector.locked());
  const std::uint64_t old_kind = detector.kind();
  std::vector<std::uint64_t> tail(step.begin(), step.begin() + 100);  // the 13th step's first 100
  feed(detector, tail);
  ASSERT_TRUE(detector.locked());
  step[100] = 0x1234'5678;  // from here on, a new value
  const std::uint64_t broken_at = detector.observed() + 1;
  std::vector<std::uint64_t> rest(step.begin() + 100, step.end());
  const std::vector<std::uint64_t> after = repeat(step, 3);
  rest.insert(rest.end(), after.begin(), after.end());
  const Fed fed = feed(detector, rest);
  EXPECT_EQ(fed.breaks, 1u);
  ASSERT_EQ(fed.locks, 2u) << "the old kind recognised, then the changed step";
  EXPECT_EQ(detector.period(), 250u);
  EXPECT_NE(detector.kind(), old_kind) << "a kind of its own";
  EXPECT_LE(fed.locked_at, broken_at + 250) << "relocked one period after the break";
}

TEST(IterationDetector, GradientAccumulationLocksOnTheWholeStepNotTheMicroStep) {
  // Two identical micro-steps, then the optimizer step.
  const std::vector<std::uint64_t> micro = distinct(100, 9), optimizer = distinct(20, 10);
  std::vector<std::uint64_t> step = micro;
  step.insert(step.end(), micro.begin(), micro.end());
  step.insert(step.end(), optimizer.begin(), optimizer.end());
  IterationDetector detector;
  feed(detector, repeat(step, 8));
  ASSERT_TRUE(detector.locked());
  EXPECT_EQ(detector.period(), 220u);
  const std::uint64_t breaks = detector.breaks();
  const Fed fed = feed(detector, repeat(step, 20));
  EXPECT_EQ(fed.breaks, 0u) << "settled: the whole step keeps its lock";
  EXPECT_EQ(detector.breaks(), breaks);
  EXPECT_EQ(detector.period(), 220u);
}

TEST(IterationDetector, AShortPeriodLocksOnlyAfterTheFloor) {
  IterationDetector detector(IterationDetector::Options{.max_period = 1024, .min_confirm = 64, .kinds = {}});
  const std::vector<std::uint64_t> step = distinct(3, 11);
  const Fed fed = feed(detector, repeat(step, 40));
  ASSERT_TRUE(detector.locked());
  EXPECT_EQ(detector.period(), 3u);
  EXPECT_EQ(fed.locked_at, 3u + 64u) << "64 identities alike after the first period";
}

TEST(IterationDetector, AStepLongerThanTheLongestPeriodIsNotFound) {
  IterationDetector detector(IterationDetector::Options{.max_period = 100, .min_confirm = 64, .kinds = {}});
  EXPECT_EQ(feed(detector, repeat(distinct(150, 12), 6)).locks, 0u);
}

}  // namespace
}  // namespace vgpumem::scheduler

namespace vgpumem::scheduler {
namespace {

// Identities fed while the detector was not locked, after its first lock:
// what ran on demand once a kind was known.
struct Unlocked {
  std::uint64_t after_first_lock = 0;
};

Unlocked feed_counting(IterationDetector& detector, const std::vector<std::uint64_t>& stream, Unlocked counted = {}) {
  for (const std::uint64_t id : stream) {
    detector.observe(id);
    if (!detector.locked() && detector.locks() > 0) ++counted.after_first_lock;
  }
  return counted;
}

// Evaluation after every two training steps, as a training loop issues it:
// the evaluation step is the training step's forward (its identities, in
// its order: the same kernels over the same buffers) and the loss read
// back, so no identity of the three-step run occurs once in it, and its
// super-period is never found by distances. Training's kind, once locked,
// is recognised a few operations into each step after an evaluation.
TEST(IterationDetector, AfterEachEvaluationTheTrainingKindIsRecognisedWithinAFewOperations) {
  const std::vector<std::uint64_t> step = distinct(250, 21);
  std::vector<std::uint64_t> evaluation(step.begin(), step.begin() + 100);
  evaluation.push_back(step.back());  // the loss read back, as the training step ends
  IterationDetector detector;
  Unlocked unlocked;
  for (int round = 0; round < 10; ++round) {
    unlocked = feed_counting(detector, repeat(step, 2), unlocked);
    unlocked = feed_counting(detector, evaluation, unlocked);
  }
  unlocked = feed_counting(detector, step, unlocked);
  EXPECT_TRUE(detector.locked());
  EXPECT_EQ(detector.period(), 250u);
  EXPECT_EQ(detector.kinds().made(), 1u) << "one kind, found again each time";
  EXPECT_GE(detector.returns(), 9u);
  // Each evaluation breaks after its forward (which training's kind still
  // follows) and the next step is named from its first few identities:
  // at most the recognition length and a couple of identities each.
  EXPECT_LE(unlocked.after_first_lock, 10u * 12u) << detector.returns() << " returns";
}

// Two kinds in turn (a GAN's discriminator and generator steps), each run
// twice in a row at first so that each locks on its own: every switch
// names the next kind from its first identities, until the pair, a run of
// kinds that repeats, is found whole and followed as one kind from then on.
TEST(IterationDetector, AlternatingKindsAreRecognisedThenFollowedAsTheirPair) {
  const std::vector<std::uint64_t> a = distinct(200, 22), b = distinct(300, 23);
  IterationDetector detector;
  feed(detector, repeat(a, 2));
  feed(detector, repeat(b, 2));
  ASSERT_EQ(detector.kinds().made(), 2u);
  Unlocked unlocked;
  for (int round = 0; round < 4; ++round) {
    unlocked = feed_counting(detector, a, unlocked);
    unlocked = feed_counting(detector, b, unlocked);
  }
  EXPECT_LE(unlocked.after_first_lock, 8u * 8u + 8u) << "each named within a few identities";
  ASSERT_TRUE(detector.locked());
  EXPECT_EQ(detector.period(), 500u) << "the pair";
  const std::uint64_t breaks = detector.breaks();
  feed(detector, repeat([&] {
         std::vector<std::uint64_t> pair = a;
         pair.insert(pair.end(), b.begin(), b.end());
         return pair;
       }(),
       10));
  EXPECT_EQ(detector.breaks(), breaks) << "the pair holds";
}

// Three shape buckets in random order: each kind, once seen twice in a
// row, is named whenever its bucket comes, a few identities into it. (A
// run of buckets that repeats by chance may lock as a kind of its own,
// and is left when the order moves on.)
TEST(IterationDetector, BucketsInRandomOrderAreEachRecognised) {
  const std::vector<std::vector<std::uint64_t>> buckets{distinct(150, 24), distinct(220, 25), distinct(300, 26)};
  IterationDetector detector;
  for (const auto& bucket : buckets) feed(detector, repeat(bucket, 2));
  ASSERT_EQ(detector.kinds().made(), 3u);
  std::mt19937_64 random(27);
  Unlocked unlocked;
  for (int s = 0; s < 60; ++s) {
    unlocked = feed_counting(detector, buckets[random() % 3], unlocked);
    EXPECT_TRUE(detector.locked()) << "step " << s;
  }
  EXPECT_LE(unlocked.after_first_lock, 60u * 8u) << "at most the recognition length a step";
}

// Identities drawn at random from a known kind's own never name it: a kind
// is named only by its identities in its order.
TEST(IterationDetector, ARandomStreamOfAKnownKindsIdentitiesNeverLocks) {
  const std::vector<std::uint64_t> step = distinct(250, 28);
  IterationDetector detector;
  feed(detector, repeat(step, 3));
  feed(detector, distinct(10, 29));  // broken
  ASSERT_FALSE(detector.locked());
  std::mt19937_64 random(30);
  std::vector<std::uint64_t> shuffled(100'000);
  for (std::uint64_t& id : shuffled) id = step[random() % step.size()];
  EXPECT_EQ(feed(detector, shuffled).locks, 0u);
}

// A kind not seen for longer than its age limit is forgotten (its memory
// goes back): the stream coming back to it must lock again over two whole
// steps. And with every slot taken, a new kind takes the place of the one
// seen longest ago.
TEST(IterationDetector, AKindNeverSeenAgainAgesOut) {
  IterationDetector::Options options;
  options.kinds.max_age = 5'000;
  IterationDetector detector(options);
  const std::vector<std::uint64_t> old_step = distinct(200, 31), other = distinct(300, 32);
  feed(detector, repeat(old_step, 4));  // (held for two periods: not a part of a step)
  const std::uint64_t old_kind = detector.kind();
  feed(detector, repeat(other, 20));  // 6,000 identities: the old kind ages out
  const Fed fed = feed(detector, repeat(old_step, 1));
  EXPECT_EQ(fed.locks, 0u) << "not recognised: forgotten";
  feed(detector, repeat(old_step, 2));
  ASSERT_TRUE(detector.locked());
  EXPECT_NE(detector.kind(), old_kind) << "learned again, a new kind";
  EXPECT_GE(detector.kinds().aged_out(), 1u);

  IterationDetector full;
  std::vector<std::vector<std::uint64_t>> kinds;
  for (std::size_t k = 0; k <= StepKinds::kMaxKinds; ++k) {
    kinds.push_back(distinct(100 + k, 40 + k));
    feed(full, repeat(kinds.back(), 2));
    feed(full, distinct(5, 60 + k));
  }
  EXPECT_EQ(full.kinds().size(), StepKinds::kMaxKinds);
  EXPECT_EQ(full.kinds().made(), StepKinds::kMaxKinds + 1);
  EXPECT_EQ(feed(full, kinds.front()).locks, 0u) << "the first kind made way for the last";
  EXPECT_EQ(feed(full, kinds.back()).locks, 1u) << "the last is named";
}

}  // namespace
}  // namespace vgpumem::scheduler
