#include "scheduler/profile_pieces.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

namespace vgpumem::scheduler {

nlohmann::json profile_in_pieces(const nlohmann::json& profile, std::uint64_t piece_bytes) {
  if (piece_bytes == 0 || piece_bytes % kPieceGranularity != 0) {
    throw std::invalid_argument("a piece is a positive multiple of 2 MiB, not " + std::to_string(piece_bytes) +
                                " bytes");
  }
  // Unit u becomes units first[u] .. first[u + 1] - 1.
  const nlohmann::json& units = profile.at("units");
  std::vector<std::uint64_t> first;
  first.reserve(units.size() + 1);
  nlohmann::json pieces = nlohmann::json::array();
  for (const nlohmann::json& unit : units) {
    first.push_back(pieces.size());
    std::uint64_t left = unit.get<std::uint64_t>();
    do {  // a unit of no bytes stays one unit
      const std::uint64_t bytes = std::min(left, piece_bytes);
      pieces.push_back(bytes);
      left -= bytes;
    } while (left > 0);
  }
  first.push_back(pieces.size());
  auto each_piece = [&](std::uint64_t unit, auto&& add) {
    for (std::uint64_t piece = first.at(unit); piece < first.at(unit + 1); ++piece) add(piece);
  };

  nlohmann::json out = profile;
  out["units"] = std::move(pieces);
  for (nlohmann::json& op : out["ops"]) {
    nlohmann::json touched = nlohmann::json::array();
    for (const nlohmann::json& unit : op.at(3)) {
      each_piece(unit.get<std::uint64_t>(), [&](std::uint64_t p) { touched.push_back(p); });
    }
    op[3] = std::move(touched);
  }
  if (out.contains("overwrites")) {
    nlohmann::json overwrites = nlohmann::json::array();
    for (const nlohmann::json& pair : profile["overwrites"]) {
      each_piece(pair.at(1).get<std::uint64_t>(), [&](std::uint64_t p) { overwrites.push_back({pair.at(0), p}); });
    }
    out["overwrites"] = std::move(overwrites);
  }
  return out;
}

}  // namespace vgpumem::scheduler
