#include "cap_watch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "process.h"

namespace vgpumem::test {

std::uint64_t parse_byte_limit(const std::string& text) {
  std::size_t used = 0;
  unsigned long long number = 0;
  try {
    number = std::stoull(text, &used);
  } catch (...) {
    return 0;
  }
  std::string unit = text.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (!unit.empty() && (unit.back() == 'i' || unit.back() == 'I')) unit.pop_back();
  if (unit.empty()) return number;
  if (unit.size() != 1) return 0;
  switch (std::toupper(static_cast<unsigned char>(unit[0]))) {
    case 'K': return number << 10;
    case 'M': return number << 20;
    case 'G': return number << 30;
    case 'T': return number << 40;
    default: return 0;
  }
}

CapWatch::CapWatch(std::map<std::string, std::string>& env) {
  auto preload = env.find("LD_PRELOAD");
  if (preload == env.end() || preload->second.find(shim_library()) == std::string::npos) return;
  if (auto policy = env.find("VGPUMEM_POLICY"); policy != env.end() && policy->second != "lru") return;
  if (auto all = env.find("VGPUMEM_LIMIT"); all != env.end()) cap_all_ = parse_byte_limit(all->second);
  for (const auto& [name, value] : env) {
    if (name.rfind("VGPUMEM_LIMIT_", 0) != 0) continue;
    try {
      const std::uint64_t cap = parse_byte_limit(value);
      if (cap != 0) cap_of_[std::stoi(name.substr(14))] = cap;
    } catch (...) {
    }
  }
  if (cap_all_ == 0 && cap_of_.empty()) return;
  watched_ = true;
  if (auto report = env.find("VGPUSIM_REPORT"); report != env.end()) {
    report_ = report->second;
    return;
  }
  static int counter = 0;
  report_ = temp_path("capwatch-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".json");
  own_report_ = true;
  env["VGPUSIM_REPORT"] = report_;
}

CapWatch::~CapWatch() {
  if (own_report_) std::remove(report_.c_str());
}

void CapWatch::check(const std::string& program) const {
  if (!watched_) return;
  std::ifstream in(report_);
  if (!in.good()) return;  // killed before the simulator wrote it: the test sees the signal
  const nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
  if (report.is_discarded() || !report.contains("devices")) return;
  for (std::size_t device = 0; device < report["devices"].size(); ++device) {
    auto it = cap_of_.find(static_cast<int>(device));
    const std::uint64_t cap = it != cap_of_.end() ? it->second : cap_all_;
    if (cap == 0) continue;
    const std::uint64_t peak = report["devices"][device].value("physical_bytes_peak", std::uint64_t{0});
    EXPECT_LE(peak, cap) << program << ": the simulated driver's physical peak on device " << device
                         << " exceeds the cap (the shim's ledger is not the proof)";
  }
}

}  // namespace vgpumem::test
