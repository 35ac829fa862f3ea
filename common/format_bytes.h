// Byte counts as people read them, for logs and messages.
#pragma once

#include <cstdint>
#include <string>

namespace vgpumem {

// "512 B", "1.50 GiB": binary units, two decimals past a KiB.
std::string format_bytes(std::uint64_t bytes);

}  // namespace vgpumem
