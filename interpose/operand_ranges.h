// Byte ranges a library call names, and the rule every hook applies to
// them: the call overwrites its output whole before reading it when the
// output is not read (its scale beta is zero, or the result goes to another
// buffer), its span holds nothing but its elements (no gaps a write would
// skip), and no input shares a byte with it (an input aliasing the output is
// read). Then the output's bytes on the host need not come back for the
// call (vmm/library_call_scope.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace vgpumem::interpose {

struct ByteRange {
  std::uint64_t address = 0, bytes = 0;
  std::uint64_t end() const { return address + bytes; }
  bool overlaps(const ByteRange& other) const {
    return bytes != 0 && other.bytes != 0 && address < other.end() && other.address < end();
  }
};

// What a call reads, for the aliasing check: a handful of ranges on the
// stack; past the last slot every further range is merged into the last one
// (larger, so the check only grows more careful).
class ReadRanges {
 public:
  void add(ByteRange range) {
    if (range.bytes == 0) return;
    if (count_ < ranges_.size()) {
      ranges_[count_++] = range;
      return;
    }
    ByteRange& last = ranges_[count_ - 1];
    const std::uint64_t from = last.address < range.address ? last.address : range.address;
    const std::uint64_t to = last.end() > range.end() ? last.end() : range.end();
    last = {from, to - from};
  }
  bool overlap(const ByteRange& range) const {
    for (std::size_t i = 0; i < count_; ++i) {
      if (ranges_[i].overlaps(range)) return true;
    }
    return false;
  }

 private:
  std::array<ByteRange, 8> ranges_{};
  std::size_t count_ = 0;
};

// `written` when the call overwrites it whole before reading it (see
// above), nothing otherwise.
inline std::optional<ByteRange> written_before_read(ByteRange written, bool dense, bool output_read,
                                                    const ReadRanges& inputs) {
  if (output_read || !dense || written.bytes == 0 || inputs.overlap(written)) return std::nullopt;
  return written;
}

}  // namespace vgpumem::interpose
