// What the memory manager tells whoever watches it: the trace writes it
// down (trace::Recorder), the scheduler learns from it. vmm/ knows only this
// interface, never who implements it.
//
// Calls come from the program's threads and the reclaimer, under the pager's
// lock for paging events: an observer records and returns, and never calls
// back into vmm/.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace vgpumem::vmm {

class MemoryObserver {
 public:
  virtual ~MemoryObserver() = default;

  // Accounting: an allocation charged to `device` (-1: not yet known), freed,
  // or refused because it would pass the cap; the bytes counted against it.
  virtual void allocated(int device, std::uint64_t address, std::uint64_t bytes, const char* api) = 0;
  virtual void freed(int device, std::uint64_t address, std::uint64_t bytes, const char* api) = 0;
  virtual void refused(int device, std::uint64_t requested, std::uint64_t in_use, std::uint64_t cap,
                       const char* api) = 0;
  virtual void device_bytes(int device, std::uint64_t bytes, std::uint64_t cap) = 0;

  // Paging: a unit went to the host (`to_host`) or came back, named by the
  // address the program knows it by; the paged bytes now resident.
  virtual void moved(int device, std::uint64_t address, std::uint64_t bytes, bool to_host) = 0;
  virtual void resident_bytes(int device, std::uint64_t bytes, std::uint64_t cap) = 0;
};

// Several observers as one (the trace and the scheduler), fixed at start-up.
class ObserverFanout final : public MemoryObserver {
 public:
  static constexpr std::size_t kMax = 4;
  // False when full.
  bool add(MemoryObserver* observer) {
    if (count_ == kMax || observer == nullptr) return false;
    observers_[count_++] = observer;
    return true;
  }

  void allocated(int device, std::uint64_t address, std::uint64_t bytes, const char* api) override {
    for (std::size_t i = 0; i < count_; ++i) observers_[i]->allocated(device, address, bytes, api);
  }
  void freed(int device, std::uint64_t address, std::uint64_t bytes, const char* api) override {
    for (std::size_t i = 0; i < count_; ++i) observers_[i]->freed(device, address, bytes, api);
  }
  void refused(int device, std::uint64_t requested, std::uint64_t in_use, std::uint64_t cap,
               const char* api) override {
    for (std::size_t i = 0; i < count_; ++i) observers_[i]->refused(device, requested, in_use, cap, api);
  }
  void device_bytes(int device, std::uint64_t bytes, std::uint64_t cap) override {
    for (std::size_t i = 0; i < count_; ++i) observers_[i]->device_bytes(device, bytes, cap);
  }
  void moved(int device, std::uint64_t address, std::uint64_t bytes, bool to_host) override {
    for (std::size_t i = 0; i < count_; ++i) observers_[i]->moved(device, address, bytes, to_host);
  }
  void resident_bytes(int device, std::uint64_t bytes, std::uint64_t cap) override {
    for (std::size_t i = 0; i < count_; ++i) observers_[i]->resident_bytes(device, bytes, cap);
  }

 private:
  std::array<MemoryObserver*, kMax> observers_{};
  std::size_t count_ = 0;
};

}  // namespace vgpumem::vmm
