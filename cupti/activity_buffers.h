// The activity buffers CUPTI fills: a fixed pool allocated when timing
// starts, handed out by the buffer-requested callback and returned once a
// completed buffer is read. Nothing is allocated while the program runs; when
// every buffer is out, CUPTI drops records (and counts them) rather than
// making the program wait.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace vgpumem::cupti {

class ActivityBuffers {
 public:
  ActivityBuffers(std::size_t count, std::size_t bytes);

  // A free buffer, or nullptr when all are out.
  std::uint8_t* take();
  void give_back(std::uint8_t* buffer);
  std::size_t buffer_bytes() const { return bytes_; }

 private:
  const std::size_t bytes_;
  std::vector<std::unique_ptr<std::uint8_t[]>> storage_;
  std::mutex mutex_;
  std::vector<std::uint8_t*> free_;  // capacity for all of them: give_back never allocates
};

}  // namespace vgpumem::cupti
