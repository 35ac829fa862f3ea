// What the producer-to-consumer grace keeps (PagerOptions::grace,
// VGPUMEM_GRACE): a leaf, so that the configuration can name it.
#pragma once

#include <cstdint>

namespace vgpumem::vmm {

enum class GraceKind : std::uint8_t {
  lend,     // what a consumer naming a small cell an earlier operation named needs (vmm/table_lending.h)
  blanket,  // every unit an operation named, through the next K operations (vmm/launch_grace.h)
};

}  // namespace vgpumem::vmm
