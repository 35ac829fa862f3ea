// The monotonic clock every layer times itself with.
#pragma once

#include <time.h>

#include <cstdint>

namespace vgpumem {

// Nanoseconds on CLOCK_MONOTONIC.
inline std::uint64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(now.tv_nsec);
}

}  // namespace vgpumem
