#include "vmm/mover.h"

#include <algorithm>
#include <chrono>

#include "common/thread_name.h"
#include "vmm/async_signals_blocked.h"
#include "vmm/atomic_max.h"
#include "vmm/host_path_stats.h"

namespace vgpumem::vmm {
namespace {

std::uint64_t steady_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

Mover::Mover(std::function<void(const Move&)> make, std::size_t capacity, std::function<void(const Move&)> drop)
    : make_(std::move(make)), drop_(std::move(drop)), mask_(capacity - 1), slots_(new Slot[capacity]) {
  for (std::size_t i = 0; i < capacity; ++i) slots_[i].sequence.store(i, std::memory_order_relaxed);
  AsyncSignalsBlocked blocked;  // inherited by the thread (vmm/async_signals_blocked.h)
  thread_ = std::thread([this] { run(); });
}

bool Mover::post(const Move& move) noexcept {
  if (stopping_.load(std::memory_order_relaxed)) return false;
  std::uint64_t position = tail_.load(std::memory_order_relaxed);
  Slot* slot = nullptr;
  for (;;) {
    slot = &slots_[position & mask_];
    const std::uint64_t sequence = slot->sequence.load(std::memory_order_acquire);
    const auto lead = static_cast<std::int64_t>(sequence - position);
    if (lead == 0) {
      if (tail_.compare_exchange_weak(position, position + 1, std::memory_order_relaxed)) break;
    } else if (lead < 0) {  // the slot still holds a move a lap behind: full
      ring_full_.fetch_add(1, std::memory_order_relaxed);
      return false;
    } else {
      position = tail_.load(std::memory_order_relaxed);
    }
  }
  slot->move = move;
  slot->posted_at = steady_ns();
  // Sequentially consistent, against the thread's going to sleep (run): of
  // this store and its store to sleeping_, each side sees the other's.
  slot->sequence.store(position + 1, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    signal_.fetch_add(1, std::memory_order_release);
    signal_.notify_one();
  }
  return true;
}

bool Mover::take(Move* move, std::uint64_t* posted_at) {
  Slot& slot = slots_[head_ & mask_];
  if (slot.sequence.load(std::memory_order_seq_cst) != head_ + 1) return false;  // empty, or still being written
  *move = slot.move;
  *posted_at = slot.posted_at;
  slot.sequence.store(head_ + mask_ + 1, std::memory_order_release);  // free for the next lap
  ++head_;
  return true;
}

void Mover::run() {
  mark_pager_thread();
  name_this_thread("vgpumem-mover");
  Move move;
  std::uint64_t posted_at = 0;
  while (!stopping_.load(std::memory_order_acquire)) {
    if (take(&move, &posted_at)) {
      const std::uint64_t began = steady_ns();
      raise_to(lag_ns_max_, began - std::min(began, posted_at));
      try {
        make_(move);
      } catch (...) {
        // Out of memory, say: the move is given up, and its unit's next use
        // brings it in on demand. An exception must not end the process here.
      }
      busy_ns_.fetch_add(steady_ns() - began, std::memory_order_relaxed);
      made_.fetch_add(1, std::memory_order_release);
      if (draining_.load(std::memory_order_acquire) != 0) made_.notify_all();
      continue;
    }
    sleeping_.store(true, std::memory_order_seq_cst);
    const std::uint32_t seen = signal_.load(std::memory_order_acquire);
    if (slots_[head_ & mask_].sequence.load(std::memory_order_seq_cst) == head_ + 1 ||
        stopping_.load(std::memory_order_acquire)) {
      sleeping_.store(false, std::memory_order_relaxed);
      continue;
    }
    signal_.wait(seen, std::memory_order_acquire);
    sleeping_.store(false, std::memory_order_relaxed);
  }
}

void Mover::drain() {
  const std::uint64_t posted = tail_.load(std::memory_order_acquire);
  draining_.fetch_add(1, std::memory_order_acq_rel);
  for (std::uint64_t made; (made = made_.load(std::memory_order_acquire)) < posted;) {
    if (stopping_.load(std::memory_order_acquire)) break;
    made_.wait(made, std::memory_order_acquire);
  }
  draining_.fetch_sub(1, std::memory_order_acq_rel);
}

void Mover::stop() {
  stopping_.store(true, std::memory_order_release);
  signal_.fetch_add(1, std::memory_order_release);
  signal_.notify_all();
  made_.fetch_add(0, std::memory_order_release);
  made_.notify_all();  // a drain waiting gives up
  if (!thread_.joinable()) return;
  thread_.join();
  // The thread is gone: what it left in the ring is this thread's to drop
  // (a poster that claimed a slot before it saw the stop has published it
  // by now, or is about to: it is waited for).
  Move move;
  std::uint64_t posted_at = 0;
  const std::uint64_t claimed = tail_.load(std::memory_order_acquire);
  while (head_ < claimed) {
    if (!take(&move, &posted_at)) {
      std::this_thread::yield();
      continue;
    }
    if (drop_) drop_(move);
  }
}

Mover::Counts Mover::counts() const {
  Counts counts;
  counts.posted = tail_.load(std::memory_order_relaxed);  // a refused move never claimed a slot
  counts.made = made_.load(std::memory_order_relaxed);
  counts.ring_full = ring_full_.load(std::memory_order_relaxed);
  counts.busy_ns = busy_ns_.load(std::memory_order_relaxed);
  counts.lag_ns_max = lag_ns_max_.load(std::memory_order_relaxed);
  return counts;
}

}  // namespace vgpumem::vmm
