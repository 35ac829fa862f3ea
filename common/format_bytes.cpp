#include "common/format_bytes.h"

#include <cstdio>
#include <iterator>

namespace vgpumem {

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  unsigned unit = 0;
  while (unit + 1 < std::size(kUnits) && bytes >= (std::uint64_t{1} << (10 * (unit + 2)))) ++unit;
  const double scaled = static_cast<double>(bytes) / static_cast<double>(std::uint64_t{1} << (10 * (unit + 1)));
  char text[32];
  std::snprintf(text, sizeof text, "%.2f %s", scaled, kUnits[unit]);
  return text;
}

}  // namespace vgpumem
