// Every capped run under the default policy is checked against the
// simulated driver's own count of physical device memory: whatever a test
// asserts, the peak the simulator saw on each device must be within that
// device's cap. run_process() applies it to every program it starts with the
// shim preloaded, so a new test checks it without asking.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace vgpumem::test {

class CapWatch {
 public:
  // `env`: the child's whole environment. Adds VGPUSIM_REPORT when the run
  // is watched and the test did not ask for a report of its own.
  explicit CapWatch(std::map<std::string, std::string>& env);
  ~CapWatch();
  CapWatch(const CapWatch&) = delete;
  CapWatch& operator=(const CapWatch&) = delete;

  // After the child has exited: each device's physical peak within its cap
  // (a gtest failure naming the device, the peak and the cap otherwise).
  void check(const std::string& program) const;

 private:
  bool watched_ = false;
  bool own_report_ = false;
  std::string report_;
  std::uint64_t cap_all_ = 0;             // VGPUMEM_LIMIT, 0 if none
  std::map<int, std::uint64_t> cap_of_;   // VGPUMEM_LIMIT_<i>
};

// "64MiB", "2GiB", "512K", "1048576": bytes; 0 for anything else (a
// percentage, or malformed).
std::uint64_t parse_byte_limit(const std::string& text);

}  // namespace vgpumem::test
