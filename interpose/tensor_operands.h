// The memory a cuDNN call names through its tensor descriptors: an N-d
// tensor of `rank` dimensions, each with its element stride. Its span runs
// from its first element to its last; it is dense when its strides pack
// its elements with no gap (some order of the dimensions, each stride the
// product of the sizes inside it), as a framework's contiguous tensors are
// in NCHW or NHWC.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>

#include "interpose/operand_ranges.h"

namespace vgpumem::interpose {

struct TensorOperand {
  static constexpr int kMaxRank = 8;
  std::uint64_t address = 0;
  int rank = 0;  // 0: unknown (its descriptor could not be read)
  std::array<std::int64_t, kMaxRank> dims{}, strides{};
  std::size_t element_bytes = 0;

  bool known() const;
  bool empty() const;
  ByteRange span() const;
  bool dense() const;
};

// What the call overwrites whole (operand_ranges.h): `output` when not read,
// known, dense, and aliasing no input.
std::optional<ByteRange> overwritten_whole(const TensorOperand& output, bool output_read,
                                           std::initializer_list<TensorOperand> inputs);

}  // namespace vgpumem::interpose
