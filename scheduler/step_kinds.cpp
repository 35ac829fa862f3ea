#include "scheduler/step_kinds.h"

#include <algorithm>
#include <bit>

namespace vgpumem::scheduler {

namespace {

std::size_t slot_hash(std::uint64_t identity, std::size_t mask) {
  return static_cast<std::size_t>((identity * 0x9E37'79B9'7F4A'7C15ull) >> 32) & mask;
}

}  // namespace

std::ptrdiff_t StepKinds::phase_of(const Kind& kind, std::uint64_t identity) {
  const std::size_t mask = kind.index.size() - 1;
  for (std::size_t at = slot_hash(identity, mask);; at = (at + 1) & mask) {
    const std::uint32_t entry = kind.index[at];
    if (entry == 0) return -1;
    if (kind.sequence[entry - 1] == identity) return static_cast<std::ptrdiff_t>(entry - 1);
  }
}

// Open addressing, at most half full: a lookup ends at an empty slot soon.
void StepKinds::build_index(Kind& kind) {
  kind.index.assign(std::bit_ceil(std::max<std::size_t>(2 * kind.sequence.size(), 16)), 0);
  const std::size_t mask = kind.index.size() - 1;
  for (std::size_t phase = 0; phase < kind.sequence.size(); ++phase) {
    const std::uint64_t identity = kind.sequence[phase];
    std::size_t at = slot_hash(identity, mask);
    for (; kind.index[at] != 0; at = (at + 1) & mask) {
      if (kind.sequence[kind.index[at] - 1] == identity) break;  // indexed at its first phase already
    }
    if (kind.index[at] == 0) kind.index[at] = static_cast<std::uint32_t>(phase + 1);
  }
}

bool StepKinds::rotated(const Kind& kind, std::span<const std::uint64_t> sequence, std::size_t offset) {
  const std::size_t period = kind.sequence.size();
  for (std::size_t i = 0; i < period; ++i) {
    if (kind.sequence[(offset + i) % period] != sequence[i]) return false;
  }
  return true;
}

const StepKinds::Kind* StepKinds::slot_of(std::uint64_t serial) const {
  for (const Kind& kind : kinds_) {
    if (kind.serial == serial && serial != 0) return &kind;
  }
  return nullptr;
}

void StepKinds::age(std::uint64_t now) {
  for (Kind& kind : kinds_) {
    if (kind.serial == 0 || now - kind.last_seen <= options_.max_age) continue;
    for (Recogniser& r : recognisers_) {
      if (r.kind == &kind) r = Recogniser{};
    }
    kind.serial = 0;
    kind.sequence = {};  // its memory goes back: it may not come again
    kind.index = {};
    ++aged_out_;
  }
}

StepKinds::Kind& StepKinds::free_slot(std::uint64_t now) {
  age(now);
  Kind* oldest = &kinds_[0];
  for (Kind& kind : kinds_) {
    if (kind.serial == 0) return kind;
    if (kind.last_seen < oldest->last_seen) oldest = &kind;
  }
  ++aged_out_;
  return *oldest;
}

StepKinds::Named StepKinds::adopt(std::span<const std::uint64_t> sequence, std::uint64_t now, bool* made) {
  stop_recognising();
  const std::size_t period = sequence.size();
  for (Kind& kind : kinds_) {
    if (kind.serial == 0 || kind.sequence.size() != period) continue;
    // Where sequence[0] lies in the kind: at its first phase, or (the
    // identity repeats within the step) at any phase that has it.
    for (std::size_t offset = 0; offset < period; ++offset) {
      if (kind.sequence[offset] != sequence[0] || !rotated(kind, sequence, offset)) continue;
      kind.last_seen = now;
      *made = false;
      return {kind.serial, kind.sequence.data(), period, (offset + period - 1) % period};
    }
  }
  Kind& kind = free_slot(now);
  kind.serial = next_serial_++;
  kind.sequence.assign(sequence.begin(), sequence.end());
  build_index(kind);
  kind.last_seen = now;
  kind.timed = false;
  ++made_;
  *made = true;
  return {kind.serial, kind.sequence.data(), period, period - 1};
}

StepKinds::Named StepKinds::recognise(std::uint64_t identity, std::uint64_t now) {
  const std::size_t need_at_most = options_.recognise == 0 ? 1 : options_.recognise;
  // The recognisers under way: each must see its kind's next identity.
  // Where several name their kinds at once (a kind, and a run of kinds
  // that begins with it: the pair of an alternation that once repeated),
  // the shortest is named: it ends soonest, and the next kind is named
  // again after it; a run that truly repeats is found whole by the
  // detector's candidates and takes over.
  Named shortest;
  for (Recogniser& r : recognisers_) {
    if (r.kind == nullptr) continue;
    const std::size_t period = r.kind->sequence.size();
    if (r.kind->sequence[r.next] != identity) {
      r = Recogniser{};
      continue;
    }
    const std::size_t phase = r.next;
    r.next = r.next + 1 == period ? 0 : r.next + 1;
    if (++r.matched < std::min(need_at_most, period)) continue;
    if (shortest.serial == 0 || period < shortest.period) {
      shortest = {r.kind->serial, r.kind->sequence.data(), period, phase};
    }
  }
  if (shortest.serial != 0) {
    stop_recognising();
    ++named_;
    return shortest;
  }
  // A new start, in every kind the identity is in (not one under way there).
  bool aged = false;
  untimed_may_start_ = false;
  for (const Kind& kind : kinds_) {
    if (kind.serial == 0) continue;
    if (now - kind.last_seen > options_.max_age) {
      aged = true;
      continue;
    }
    const std::ptrdiff_t phase = phase_of(kind, identity);
    if (phase < 0) continue;
    const std::size_t period = kind.sequence.size();
    if (!kind.timed && static_cast<std::size_t>(phase) + 1 == period) untimed_may_start_ = true;
    const std::size_t next = (static_cast<std::size_t>(phase) + 1) % period;
    if (std::any_of(recognisers_.begin(), recognisers_.end(),
                    [&](const Recogniser& r) { return r.kind == &kind && r.next == next; })) {
      continue;
    }
    if (need_at_most <= 1 || period == 1) {
      stop_recognising();
      ++named_;
      return {kind.serial, kind.sequence.data(), period, static_cast<std::size_t>(phase)};
    }
    // A free recogniser, or the one that has matched least gives way.
    Recogniser* weakest = &recognisers_[0];
    for (Recogniser& r : recognisers_) {
      if (r.kind == nullptr || (weakest->kind != nullptr && r.matched < weakest->matched)) weakest = &r;
    }
    *weakest = Recogniser{&kind, next, 1};
  }
  if (aged) age(now);
  return {};
}

void StepKinds::timed(std::uint64_t serial) {
  for (Kind& kind : kinds_) {
    if (kind.serial == serial && serial != 0) kind.timed = true;
  }
}

bool StepKinds::was_timed(std::uint64_t serial) const {
  const Kind* kind = slot_of(serial);
  return kind != nullptr && kind->timed;
}

void StepKinds::seen(std::uint64_t serial, std::uint64_t now) {
  for (Kind& kind : kinds_) {
    if (kind.serial == serial && serial != 0) kind.last_seen = now;
  }
}

std::size_t StepKinds::size() const {
  return static_cast<std::size_t>(std::count_if(kinds_.begin(), kinds_.end(), [](const Kind& k) { return k.serial != 0; }));
}

}  // namespace vgpumem::scheduler
