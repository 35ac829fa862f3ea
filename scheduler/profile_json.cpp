#include "scheduler/profile_json.h"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

namespace vgpumem::scheduler {

namespace {

// 2: "offload_delay" is the launch grace alone. Format 1 counted one
// operation more (an offload then went with the operation after the
// grace's last): read as 2 with that one taken off.
constexpr int kFormat = 2;
constexpr unsigned kKernel = 1, kHeavy = 2, kConvolution = 4, kCallStart = 8;
// The LibraryOp of an operation a library call launched, in bits 4-7.
constexpr unsigned kLibraryShift = 4, kLibraryMask = 0xf;
constexpr unsigned kToHost = 256;  // a copy into host memory

void require(bool ok, const std::string& what) {
  if (!ok) throw ProfileFormatError("profiled step: " + what);
}

// Parsed text gives non-negative integers as unsigned; built JSON may not.
bool is_count(const nlohmann::json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0);
}

}  // namespace

nlohmann::json profile_to_json(const IterationProfile& profile, const std::vector<std::string>* op_names) {
  nlohmann::json units = nlohmann::json::array();
  for (const ProfileUnit& unit : profile.units) units.push_back(unit.bytes);
  const bool named = op_names != nullptr && op_names->size() == profile.ops.size();
  nlohmann::json names = nlohmann::json::array();
  std::map<std::string, std::size_t> name_index;
  nlohmann::json ops = nlohmann::json::array();
  for (std::size_t i = 0; i < profile.ops.size(); ++i) {
    const ProfileOp& op = profile.ops[i];
    const unsigned flags = (op.kernel ? kKernel : 0) | (op.heavy ? kHeavy : 0) | (op.convolution ? kConvolution : 0) |
                           (op.call_start ? kCallStart : 0) | (static_cast<unsigned>(op.library) << kLibraryShift) |
                           (op.to_host ? kToHost : 0);
    nlohmann::json touched = nlohmann::json::array();
    for (std::uint32_t k = 0; k < op.use_count; ++k) touched.push_back(profile.uses[op.first_use + k]);
    // Whole nanoseconds: the profile's times come from events of 0.5 µs
    // resolution on hardware, and the file stays readable.
    nlohmann::json entry = {static_cast<std::int64_t>(op.duration_ns), static_cast<std::int64_t>(op.stall_ns), flags,
                            std::move(touched)};
    if (named) {
      const auto [at, added] = name_index.try_emplace((*op_names)[i], names.size());
      if (added) names.push_back((*op_names)[i]);
      entry.push_back(at->second);
    }
    ops.push_back(std::move(entry));
  }
  nlohmann::json out = {{"format", kFormat},
                        {"period", profile.period()},
                        {"step_ns", profile.step_ns},
                        {"offload_delay", profile.offload_delay},
                        {"backward_begins", profile.backward_begins},
                        {"units", std::move(units)},
                        {"ops", std::move(ops)}};
  if (named) out["names"] = std::move(names);
  nlohmann::json overwrites = nlohmann::json::array();  // [operation, unit]: it overwrites the unit whole
  for (std::size_t i = 0; i < profile.ops.size(); ++i) {
    const ProfileOp& op = profile.ops[i];
    for (std::uint32_t k = 0; k < op.use_count; ++k) {
      if (profile.overwrites_at(op.first_use + k)) overwrites.push_back({i, profile.uses[op.first_use + k]});
    }
  }
  if (!overwrites.empty()) out["overwrites"] = std::move(overwrites);
  return out;
}

std::string profiled_operation_name(const nlohmann::json& profile, std::size_t op) {
  if (!profile.is_object() || !profile.contains("ops") || !profile.contains("names")) return "";
  const nlohmann::json &ops = profile["ops"], &names = profile["names"];
  if (!ops.is_array() || op >= ops.size() || !names.is_array()) return "";
  const nlohmann::json& entry = ops[op];
  if (!entry.is_array() || entry.size() != 5 || !is_count(entry[4])) return "";
  const std::uint64_t index = entry[4].get<std::uint64_t>();
  if (index >= names.size() || !names[index].is_string()) return "";
  return names[index].get<std::string>();
}

IterationProfile profile_from_json(const nlohmann::json& json) {
  require(json.is_object(), "not a JSON object");
  const int format = json.value("format", 0);
  require(format == kFormat || format == 1, "format is not 1 or " + std::to_string(kFormat));
  require(json.contains("units") && json["units"].is_array(), "no \"units\" array");
  require(json.contains("ops") && json["ops"].is_array() && !json["ops"].empty(), "no \"ops\" array");
  IterationProfile profile;
  profile.offload_delay = json.value("offload_delay", std::size_t{1});
  if (format == 1 && profile.offload_delay > 0) --profile.offload_delay;
  for (const nlohmann::json& bytes : json["units"]) {
    require(is_count(bytes), "a unit's bytes are not a non-negative integer");
    ProfileUnit unit;
    unit.bytes = bytes.get<std::uint64_t>();
    profile.total_bytes += unit.bytes;
    profile.units.push_back(std::move(unit));
  }
  for (const nlohmann::json& entry : json["ops"]) {
    require(entry.is_array() && (entry.size() == 4 || (entry.size() == 5 && is_count(entry[4]))) &&
                entry[0].is_number() && entry[1].is_number() && is_count(entry[2]) && entry[3].is_array(),
            "an operation is not [duration_ns, stall_ns, flags, [unit, ...]] or that and a name's index");
    require(entry.size() == 4 || (json.contains("names") && json["names"].is_array() &&
                                  entry[4].get<std::uint64_t>() < json["names"].size()),
            "an operation's name index is not in \"names\"");
    ProfileOp op;
    op.duration_ns = entry[0].get<double>();
    op.stall_ns = entry[1].get<double>();
    require(op.duration_ns >= 0 && op.stall_ns >= 0, "an operation's duration or stall is negative");
    const unsigned flags = entry[2].get<unsigned>();
    op.kernel = (flags & kKernel) != 0;
    op.heavy = (flags & kHeavy) != 0;
    op.convolution = (flags & kConvolution) != 0;
    op.call_start = (flags & kCallStart) != 0;
    // (Traces before 2026-11-26 have no flag for it; their names say it.)
    const nlohmann::json* name = entry.size() == 5 ? &json["names"][entry[4].get<std::size_t>()] : nullptr;
    op.to_host = (flags & kToHost) != 0 ||
                 (!op.kernel && name != nullptr && name->is_string() && is_copy_to_host(name->get<std::string>()));
    const unsigned library = (flags >> kLibraryShift) & kLibraryMask;
    require(library <= static_cast<unsigned>(LibraryOp::other), "an operation's library call kind is unknown");
    op.library = static_cast<LibraryOp>(library);
    op.start_ns = profile.step_ns;
    profile.step_ns += op.duration_ns;
    profile.stall_ns += op.stall_ns;
    op.first_use = static_cast<std::uint32_t>(profile.uses.size());
    const auto index = static_cast<std::uint32_t>(profile.ops.size());
    for (const nlohmann::json& touched : entry[3]) {
      require(is_count(touched) && touched.get<std::uint64_t>() < profile.units.size(),
              "operation " + std::to_string(index) + " names a unit that is not in \"units\"");
      const auto u = touched.get<std::uint32_t>();
      std::vector<std::uint32_t>& uses = profile.units[u].uses;
      require(uses.empty() || uses.back() != index, "operation " + std::to_string(index) + " names a unit twice");
      uses.push_back(index);
      profile.units[u].overwritten.push_back(0);
      profile.uses.push_back(u);
      profile.overwrites.push_back(0);
    }
    op.use_count = static_cast<std::uint32_t>(profile.uses.size()) - op.first_use;
    profile.ops.push_back(op);
  }
  if (json.contains("overwrites")) {
    require(json["overwrites"].is_array(), "\"overwrites\" is not an array");
    for (const nlohmann::json& pair : json["overwrites"]) {
      require(pair.is_array() && pair.size() == 2 && is_count(pair[0]) && is_count(pair[1]) &&
                  pair[0].get<std::uint64_t>() < profile.ops.size(),
              "an overwrite is not [operation, unit] of this step");
      const ProfileOp& op = profile.ops[pair[0].get<std::size_t>()];
      bool found = false;
      for (std::uint32_t k = 0; k < op.use_count && !found; ++k) {
        found = profile.uses[op.first_use + k] == pair[1].get<std::uint64_t>();
        if (!found) continue;
        profile.overwrites[op.first_use + k] = 1;
        ProfileUnit& unit = profile.units[profile.uses[op.first_use + k]];
        const auto use = std::lower_bound(unit.uses.begin(), unit.uses.end(), pair[0].get<std::uint32_t>());
        unit.overwritten[static_cast<std::size_t>(use - unit.uses.begin())] = 1;
      }
      require(found, "an overwrite names a unit its operation does not touch");
    }
  }
  profile.backward_begins = find_backward_begins(profile);
  return profile;
}

}  // namespace vgpumem::scheduler
