#include "interpose/tensor_operands.h"

#include <utility>

namespace vgpumem::interpose {

bool TensorOperand::known() const {
  if (address == 0 || rank <= 0 || rank > kMaxRank || element_bytes == 0) return false;
  for (int d = 0; d < rank; ++d) {
    if (dims[static_cast<std::size_t>(d)] < 0 || strides[static_cast<std::size_t>(d)] < 0) return false;
  }
  return true;
}

bool TensorOperand::empty() const {
  for (int d = 0; d < rank; ++d) {
    if (dims[static_cast<std::size_t>(d)] == 0) return true;
  }
  return false;
}

ByteRange TensorOperand::span() const {
  if (empty()) return {address, 0};
  std::uint64_t last = 0;
  for (int d = 0; d < rank; ++d) {
    last += static_cast<std::uint64_t>(dims[static_cast<std::size_t>(d)] - 1) *
            static_cast<std::uint64_t>(strides[static_cast<std::size_t>(d)]);
  }
  return {address, (last + 1) * element_bytes};
}

bool TensorOperand::dense() const {
  // Innermost first (by stride; a dimension of size 1 may have any stride).
  std::array<int, kMaxRank> order{};
  int used = 0;
  for (int d = 0; d < rank; ++d) {
    if (dims[static_cast<std::size_t>(d)] != 1) order[static_cast<std::size_t>(used++)] = d;
  }
  for (int i = 1; i < used; ++i) {  // insertion sort: eight at most
    for (int j = i; j > 0; --j) {
      auto& inner = order[static_cast<std::size_t>(j - 1)];
      auto& outer = order[static_cast<std::size_t>(j)];
      if (strides[static_cast<std::size_t>(inner)] <= strides[static_cast<std::size_t>(outer)]) break;
      std::swap(inner, outer);
    }
  }
  std::int64_t packed = 1;
  for (int i = 0; i < used; ++i) {
    const auto d = static_cast<std::size_t>(order[static_cast<std::size_t>(i)]);
    if (strides[d] != packed) return false;
    packed *= dims[d];
  }
  return true;
}

std::optional<ByteRange> overwritten_whole(const TensorOperand& output, bool output_read,
                                           std::initializer_list<TensorOperand> inputs) {
  if (!output.known() || output.empty()) return std::nullopt;
  ReadRanges read;
  for (const TensorOperand& input : inputs) {
    if (input.address == 0) continue;
    // An input of unknown extent might reach anywhere past its start.
    read.add(input.known() ? input.span() : ByteRange{input.address, ~std::uint64_t{0} - input.address});
  }
  return written_before_read(output.span(), output.dense(), output_read, read);
}

}  // namespace vgpumem::interpose
