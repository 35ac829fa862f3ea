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

void Access::release() {
  for (std::size_t i = 0; i < held_; ++i) at(i)->launching.fetch_sub(1, std::memory_order_release);
  held_ = 0;
  if (feed_ != nullptr && count_ > 0) {
    ExecutionIdentity identity = identity_;
    identity.mix(reinterpret_cast<std::uintptr_t>(function_ != nullptr ? static_cast<const void*>(function_)
                                                                         : static_cast<const void*>(api_)));
    const CUevent ended = started_ != nullptr ? marks_->mark(stream_) : nullptr;
    Unit* const* units = spilled_ ? spill_.data() : inline_;
    AccessRecord record{identity.value(), stream_, bit_, function_, api_, units, count_, at(0)->device, started_, ended};
    record.launch_id = launch_id_;
    record.tick = tick_;
    record.thread_slot = &thread_->feed;
    if (const LibraryCallScope* call = thread_->library_call) {
      record.library_op = call->op;
      record.library_call = call->serial;
      record.overwritten = call->overwritten_whole(units, count_);
    }
    thread_->enqueued_bit = bit_;
    const bool time_next = feed_->accessed(record);
    thread_->enqueued_bit = 0;
    thread_->time_next = time_next ? feed_ : nullptr;
    started_ = nullptr;
  }
  if (started_ != nullptr) marks_->release_mark(count_ > 0 ? at(0)->device : 0, started_);  // nobody wants it
  started_ = nullptr;
  feed_ = nullptr;
  wants_launch_id_ = false;
  launch_id_ = 0;
  tick_ = 0;
  identity_.reset();
  count_ = 0;
  if (spilled_) {
    spill_.clear();
    if (t_spill.capacity() < spill_.capacity()) t_spill.swap(spill_);
    spilled_ = false;
  }
}

}  // namespace vgpumem::vmm
