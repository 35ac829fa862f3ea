// A run's steady state, as `vgpumem report` and `vgpumem bench` read it: the
// trailing iterations of the trace's schedule.recent_iterations that the plan
// followed throughout (the first after a lock is recorded, not yet planned,
// and the warm-up before it ran on demand).
#pragma once

#include <cstddef>

#include <nlohmann/json.hpp>

namespace vgpumem::cli {

// The index in `recent` of the first of its trailing iterations the plan
// followed throughout (every operation followed); recent.size() where the
// last was not, or `recent` is no array.
inline std::size_t first_followed_throughout(const nlohmann::json& recent) {
  if (!recent.is_array()) return 0;
  const auto followed_throughout = [](const nlohmann::json& it) {
    return it.is_object() && it.contains("followed") && it.contains("operations") && it["followed"].is_number() &&
           it["operations"].is_number() && it["followed"].get<double>() == it["operations"].get<double>();
  };
  std::size_t first = recent.size();
  while (first > 0 && followed_throughout(recent[first - 1])) --first;
  return first;
}

}  // namespace vgpumem::cli
