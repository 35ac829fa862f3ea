// A profiled step with its units cut into pieces: what the planners would
// make of a step if the pager could move part of a unit. `vgpumem simulate
// --pieces` plans on it to measure what partial-unit moves would be worth
// before the pager can make them (docs/journal/2026-11-26-benchmarks.md, "Moving
// part of a unit: what the model says"). A plan made on it cannot run as it is: its
// units are not the pager's.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>

namespace vgpumem::scheduler {

// The piece sizes accepted: whole chunks (2 MiB), since the pager maps and
// unmaps a unit's memory in chunks.
inline constexpr std::uint64_t kPieceGranularity = std::uint64_t{2} << 20;

// `profile` (as profile_to_json writes it, already read once without error)
// with each unit of more than `piece_bytes` cut into units of `piece_bytes`
// and one of the rest, numbered in place so the order of first use holds;
// every operation that touched the unit touches each of its pieces, and
// overwrites it whole likewise. `piece_bytes` is a positive multiple of
// kPieceGranularity (std::invalid_argument otherwise).
nlohmann::json profile_in_pieces(const nlohmann::json& profile, std::uint64_t piece_bytes);

}  // namespace vgpumem::scheduler
