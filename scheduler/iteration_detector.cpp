#include "scheduler/iteration_detector.h"

#include <algorithm>
#include <bit>

namespace vgpumem::scheduler {

namespace {

std::size_t power_of_two_at_least(std::size_t n) { return std::bit_ceil(std::max<std::size_t>(n, 2)); }

}  // namespace

IterationDetector::IterationDetector(Options options) : options_(options), kinds_(options.kinds) {
  options_.max_period = std::max<std::size_t>(options_.max_period, 1);
  ring_.assign(power_of_two_at_least(options_.max_period + 1), 0);
  ring_mask_ = ring_.size() - 1;
  const std::size_t table = power_of_two_at_least(std::max<std::size_t>(std::size_t{1} << 12, 2 * options_.max_period));
  last_.assign(table / 4, Set{});
  set_mask_ = table / 4 - 1;
}

IterationDetector::Event IterationDetector::observe_otherwise(std::uint64_t identity, std::uint64_t index) {
  if (!locked()) {
    if (learn(identity, index) == Event::locked) return Event::locked;
    const StepKinds::Named named = kinds_.recognise(identity, index);
    if (named.serial == 0) return Event::none;
    enter(named, index);
    ++returns_;
    new_kind_ = false;
    return Event::locked;
  }
  const std::size_t next = phase_ + 1 == period_ ? 0 : phase_ + 1;
  if (settled_) {  // broken: the table is brought up to date first
    catch_up(index);
    remember(identity, index);
    kinds_.seen(kind_, index);
    return break_lock(identity, index);
  }
  // A recognised lock: the candidates are still followed, and one that
  // locks takes over, whether the kind holds or not (a longer period: the
  // whole step the recognised kind was a part of; the same period, changed
  // for good; or the kind itself, found whole: settled).
  const bool holds = sequence_[next] == identity;
  if (holds) {
    ++held_;
    phase_ = next;
  }
  const std::uint64_t kind = kind_;
  kinds_.seen(kind, index);
  if (learn(identity, index) == Event::locked) {
    if (kind_ != kind) return Event::locked;
    --locks_;  // found again whole: the lock it was, now settled
    --returns_;
    return Event::none;
  }
  if (!holds) return break_lock(identity, index);
  if (index - lock_index_ >= 2 * period_) {
    settled_ = true;
    frozen_from_ = index;
    candidates_.fill(Candidate{});
  }
  return Event::none;
}

IterationDetector::Event IterationDetector::learn(std::uint64_t identity, std::uint64_t index) {
  const std::uint64_t last_at = remember(identity, index);
  if (last_at != 0 && index - (last_at - 1) <= options_.max_period) {
    consider(static_cast<std::size_t>(index - (last_at - 1)));
  }
  return follow_candidates(identity);
}

void IterationDetector::enter(const StepKinds::Named& kind, std::uint64_t index) {
  period_ = kind.period;
  phase_ = kind.phase;
  sequence_ = kind.sequence;
  kind_ = kind.serial;
  lock_index_ = index;
  // Where the kind's phase last stood at period - 1, as if it had locked there.
  locked_at_ = index - std::min<std::uint64_t>(index, (phase_ + 1) % period_);
  held_ = 0;
  settled_ = false;
  ++locks_;
}

std::uint64_t IterationDetector::remember(std::uint64_t identity, std::uint64_t index) {
  Set& set = last_[static_cast<std::size_t>((identity * 0x9E37'79B9'7F4A'7C15ull) >> 40) & set_mask_];
  Last* last = &set.ways[0];
  for (Last& way : set.ways) {
    if (way.key == identity && way.at != 0) {
      last = &way;
      break;
    }
    if (way.at < last->at) last = &way;  // the oldest (or a free way) gives way
  }
  const std::uint64_t last_at = last->key == identity ? last->at : 0;
  *last = Last{identity, index + 1};
  return last_at;
}

// While locked the table is left alone (one random access a launch into a
// table of a megabyte, a cache miss each, was the detector's whole cost on
// the launch path). The stream held its period since the lock, so every
// identity seen since then last occurred within the final period before
// `index`: replaying those, in order, leaves each where it last was, as if
// the table had been kept all along.
void IterationDetector::catch_up(std::uint64_t index) {
  const std::uint64_t from = std::max<std::uint64_t>(frozen_from_ + 1, index - std::min<std::uint64_t>(index, period_));
  for (std::uint64_t i = from; i < index; ++i) remember(ring_[i & ring_mask_], i);
}

// Starts following `period` unless it is followed already; with every slot
// taken, the candidate that has matched least gives way.
void IterationDetector::consider(std::size_t period) {
  Candidate* weakest = &candidates_[0];
  for (Candidate& c : candidates_) {
    if (c.period == period) return;
    if (c.period == 0 || (weakest->period != 0 && c.matches < weakest->matches)) weakest = &c;
  }
  *weakest = Candidate{period, 0};
}

// How long `period` must hold to lock: two iterations, the floor, and longer
// than it held before if it broke early then.
std::size_t IterationDetector::needed(std::size_t period) const {
  std::size_t held_before = 0;
  for (const Suspect& s : suspects_) {
    if (s.period == period) held_before = std::max(held_before, s.held + 1);
  }
  return std::max({period, options_.min_confirm, held_before});
}

IterationDetector::Event IterationDetector::follow_candidates(std::uint64_t identity) {
  for (Candidate& c : candidates_) {
    if (c.period == 0 || seen_ <= c.period) continue;
    if (back(c.period) != identity) {
      c = Candidate{};
      continue;
    }
    if (++c.matches < needed(c.period)) continue;
    // The period's last identities, in order, are its kind (found, or made).
    const std::size_t period = c.period;
    const std::size_t matches = c.matches;
    last_period_.resize(period);
    for (std::size_t i = 0; i < period; ++i) last_period_[i] = back(period - 1 - i);
    bool made = false;
    const StepKinds::Named kind = kinds_.adopt(last_period_, seen_ - 1, &made);
    enter(kind, seen_ - 1);
    held_ = matches;
    settled_ = true;
    frozen_from_ = seen_ - 1;
    new_kind_ = made;
    if (!made) ++returns_;
    candidates_.fill(Candidate{});
    return Event::locked;
  }
  return Event::none;
}

// Broken. Held for less than two periods past the lock: a part of the
// iteration, which must now repeat for longer to lock again.
IterationDetector::Event IterationDetector::break_lock(std::uint64_t identity, std::uint64_t index) {
  if (seen_ - 1 - lock_index_ < 2 * period_) {
    suspects_[next_suspect_] = Suspect{period_, held_};
    next_suspect_ = (next_suspect_ + 1) % kSuspects;
  }
  period_ = 0;
  held_ = 0;
  settled_ = false;
  sequence_ = nullptr;
  // The identity that broke it may begin a kind (or end one: the next may
  // begin it): recognition starts with it. (A kind named by one identity
  // alone is named with the next.)
  if (kinds_.recognise(identity, index).serial != 0) kinds_.stop_recognising();
  ++breaks_;
  return Event::broken;
}

}  // namespace vgpumem::scheduler
