#include "vmm/access.h"

#include <algorithm>

#include "vmm/library_call_scope.h"

namespace vgpumem::vmm {
namespace {

// The spill buffer each thread lends its operations: it keeps its capacity,
// so only an operation wider than any before it on the thread allocates.
thread_local std::vector<Unit*> t_spill;

}  // namespace

void Access::add(Unit* unit) {
  if (count_ > 0 && at(count_ - 1) == unit) return;
  if (!spilled_) {
    if (std::find(inline_, inline_ + count_, unit) != inline_ + count_) return;
    if (count_ < kInline) {
      inline_[count_++] = unit;
      return;
    }
    spill_.swap(t_spill);
    spill_.assign(inline_, inline_ + count_);
    spilled_ = true;
  }
  spill_.push_back(unit);
  ++count_;
}

void Access::drop_duplicates_from(std::size_t from) {
  if (!spilled_ || count_ - from < 2) return;
  const auto first = spill_.begin() + static_cast<std::ptrdiff_t>(from);
  std::sort(first, spill_.end());
  spill_.erase(std::unique(first, spill_.end()), spill_.end());
  count_ = spill_.size();
}

void Access::hold_new() {
  for (; held_ < count_; ++held_) at(held_)->launching.fetch_add(1, std::memory_order_seq_cst);
}

void Access::drop_from(std::size_t from) {
  if (from >= count_) return;
  for (std::size_t i = from; i < held_; ++i) at(i)->launching.fetch_sub(1, std::memory_order_release);
  held_ = std::min(held_, from);
  count_ = from;
  if (spilled_) spill_.resize(from);
}

void Access::tell_feed() {
  if (count_ > 0) {
    identity_.mix(reinterpret_cast<std::uintptr_t>(record_.function != nullptr
                                                       ? static_cast<const void*>(record_.function)
                                                       : static_cast<const void*>(record_.api)));
    record_.identity = identity_.value();
    record_.units = spilled_ ? spill_.data() : inline_;
    record_.count = count_;
    record_.device = at(0)->device;
    record_.ended = record_.started != nullptr ? marks_->mark(record_.stream) : nullptr;
    const LibraryCallScope* call = thread_->library_call;
    record_.library_op = call != nullptr ? call->op : LibraryOp::none;
    record_.library_call = call != nullptr ? call->serial : 0;
    record_.overwritten = call != nullptr ? call->overwritten_whole(record_.units, count_) : 0;
    thread_->enqueued_bit = record_.stream_bit;
    const bool time_next = feed_->accessed(record_);
    thread_->enqueued_bit = 0;
    keep_timing_answer(time_next);
  } else if (record_.started != nullptr) {
    marks_->release_mark(0, record_.started);  // nobody wants it
  }
  feed_ = nullptr;
}

// A named stream's answer goes where every thread issuing to the stream
// finds it (one bit of the pager's: a framework's autograd thread issues
// part of the step the training loop's thread timed); it is written only
// when it changes, at a timed iteration's start and end, so an operation
// costs a load. The unnamed bit stands for each thread's own default
// stream: its answer is the thread's.
void Access::keep_timing_answer(bool time_next) {
  const std::uint64_t bit = record_.stream_bit;
  if (bit == StreamRegistry::kUnnamedBit) {
    thread_->time_next = time_next ? feed_ : nullptr;
    return;
  }
  const bool kept = (streams_to_time_->load(std::memory_order_relaxed) & bit) != 0;
  if (kept == time_next) return;
  if (time_next) {
    streams_to_time_->fetch_or(bit, std::memory_order_relaxed);
  } else {
    streams_to_time_->fetch_and(~bit, std::memory_order_relaxed);
  }
}

void Access::release() {
  for (std::size_t i = 0; i < held_; ++i) at(i)->launching.fetch_sub(1, std::memory_order_release);
  held_ = 0;
  if (feed_ != nullptr) tell_feed();
  wants_launch_id_ = false;
  identity_.reset();
  names_.begin();
  count_ = 0;
  if (spilled_) {
    spill_.clear();
    if (t_spill.capacity() < spill_.capacity()) t_spill.swap(spill_);
    spilled_ = false;
  }
}

}  // namespace vgpumem::vmm
