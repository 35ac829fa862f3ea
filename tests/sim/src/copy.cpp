// Copies and memsets as stream work. Device operands must be mapped and
// accessible when the call is made (else CUDA_ERROR_INVALID_VALUE, nothing
// written) and again when the work runs (else a sticky
// CUDA_ERROR_ILLEGAL_ADDRESS, as a copy engine faulting on an unmapped page).
//
// When the host waits follows CUDA's "API synchronization behavior": a copy
// from pageable host memory is staged when issued (the caller may reuse its
// buffer at once) but the last staged chunk may still be in flight, so the
// copy has not landed when the call returns; a copy into pageable host memory,
// and a synchronous copy from pinned memory or into host memory, return when
// the copy is done; device-to-device copies and memsets never make the host
// wait. Pageable copies run at the measured pageable rate, and the host is
// busy staging for all but the last chunk.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "sim.h"

namespace vgpusim {
namespace {

// A copy across the link costs a fixed setup besides its bytes.
constexpr double kCopySetupNs = 2000;
// The driver stages pageable memory through pinned buffers of about this size.
constexpr std::uint64_t kStagingChunkBytes = 2u << 20;

// The bytes a shape covers on one side.
struct Side {
  std::uint64_t base, pitch, slice;
};

template <class RowFn>
void for_each_row(const CopyShape& shape, RowFn&& fn) {
  for (std::uint64_t z = 0; z < shape.depth; ++z) {
    for (std::uint64_t y = 0; y < shape.height; ++y) fn(z, y);
  }
}

bool side_accessible(Simulator& sim, const CopyShape& shape, const Side& side, bool include_freed) {
  bool ok = true;
  for_each_row(shape, [&](std::uint64_t z, std::uint64_t y) {
    ok = ok && sim.accessible(side.base + z * side.slice + y * side.pitch, shape.width, include_freed);
  });
  return ok;
}

std::uint64_t first_inaccessible(Simulator& sim, const CopyShape& shape, const Side& side) {
  std::uint64_t address = 0;
  for_each_row(shape, [&](std::uint64_t z, std::uint64_t y) {
    const std::uint64_t row = side.base + z * side.slice + y * side.pitch;
    if (address == 0 && !sim.accessible(row, shape.width, true)) address = row;
  });
  return address;
}

std::uint64_t footprint(const CopyShape& shape, const Side& side) {
  return (shape.depth - 1) * side.slice + (shape.height - 1) * side.pitch + shape.width;
}

Engine engine_for(const CopyShape& shape) {
  if (shape.dst_device && !shape.src_device) return Engine::copy_h2d;
  if (!shape.dst_device && shape.src_device) return Engine::copy_d2h;
  return shape.dst_device ? Engine::compute : Engine::none;
}

}  // namespace

bool is_device_address(Simulator& sim, std::uint64_t address) {
  const Region* region = sim.region_of(address);
  return region != nullptr && !region->freed;
}

CUresult copy(const CopyShape& requested, CUstream stream_handle, bool per_thread_api, CopySync sync, const char* api) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count(api);
  Context* context = nullptr;
  if (CUresult r = check_context(sim, &context)) return r;
  CopyShape shape = requested;
  if (shape.width == 0 || shape.height == 0 || shape.depth == 0) return CUDA_SUCCESS;
  if (shape.dst == 0 || shape.src == 0) return CUDA_ERROR_INVALID_VALUE;
  if (shape.height > 1 && (shape.dst_pitch < shape.width || shape.src_pitch < shape.width)) return CUDA_ERROR_INVALID_VALUE;
  const Side dst{shape.dst, shape.dst_pitch, shape.dst_slice}, src{shape.src, shape.src_pitch, shape.src_slice};
  if ((shape.dst_device && !side_accessible(sim, shape, dst, false)) ||
      (shape.src_device && !side_accessible(sim, shape, src, false))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (sync == CopySync::sync) {
    if (CUresult r = check_capture_allows(sim)) return r;
  }
  CUresult error;
  Stream* stream = resolve_stream(sim, stream_handle, per_thread_api, &error);
  if (stream == nullptr) return error;
  if (sim.inject_fault("memcpy")) return CUDA_ERROR_UNKNOWN;

  const bool host_source = !shape.src_device, host_destination = !shape.dst_device;
  const bool pageable_source = host_source && !is_pinned_host(sim, shape.src, footprint(shape, src));
  const bool pageable_destination = host_destination && !is_pinned_host(sim, shape.dst, footprint(shape, dst));
  const std::uint64_t bytes = shape.width * shape.height * shape.depth;

  // A pageable source is staged now, so the caller may reuse it on return.
  auto staged = std::make_shared<std::vector<unsigned char>>();
  if (pageable_source) {
    if (sync == CopySync::sync) wait_until(sim, stream->tail_ns, nullptr);  // a stream sync comes first
    staged->resize(bytes);
    std::uint64_t at = 0;
    for_each_row(shape, [&](std::uint64_t z, std::uint64_t y) {
      std::memcpy(staged->data() + at, reinterpret_cast<const void*>(src.base + z * src.slice + y * src.pitch), shape.width);
      at += shape.width;
    });
  }

  Operation operation;
  operation.what = "copy";
  operation.bytes = bytes;
  operation.engine = engine_for(shape);
  operation.effect_at_end = true;
  const bool crosses_link = operation.engine == Engine::copy_h2d || operation.engine == Engine::copy_d2h;
  const double gbps = !crosses_link ? sim.device_copy_gbps
                      : pageable_source || pageable_destination ? sim.pageable_gbps
                                                                : sim.link_gbps;
  operation.duration_ns = static_cast<double>(bytes) / gbps + (crosses_link ? kCopySetupNs : 0.0);
  const int device = context->device;
  operation.run = [shape, dst, src, staged, bytes, device, api] {
    Simulator& s = Simulator::get();
    for (const auto& [side, is_device] : {std::pair{dst, shape.dst_device}, std::pair{src, shape.src_device}}) {
      if (is_device && !side_accessible(s, shape, side, true)) {
        record_illegal_access(s, api, first_inaccessible(s, shape, side), device);
        return CUDA_ERROR_ILLEGAL_ADDRESS;
      }
    }
    std::uint64_t at = 0;
    for_each_row(shape, [&](std::uint64_t z, std::uint64_t y) {
      const void* from = staged->empty() ? reinterpret_cast<const void*>(src.base + z * src.slice + y * src.pitch)
                                         : staged->data() + at;
      std::memmove(reinterpret_cast<void*>(dst.base + z * dst.slice + y * dst.pitch), from, shape.width);
      at += shape.width;
    });
    if (shape.dst_device && !shape.src_device) s.stats.bytes_h2d += bytes;
    if (!shape.dst_device && shape.src_device) s.stats.bytes_d2h += bytes;
    return CUDA_SUCCESS;
  };
  const double duration_ns = operation.duration_ns;
  if (stream->capture == nullptr) spend_issue_time(sim, Issue::copy);
  if (CUresult r = enqueue(sim, stream, std::move(operation))) return r;
  if (stream->capture != nullptr) return CUDA_SUCCESS;
  if (shape.dst_device && !shape.src_device) sim.stats.issued_h2d += bytes;
  if (!shape.dst_device && shape.src_device) sim.stats.issued_d2h += bytes;
  if (pageable_source) {
    // The host itself feeds the staging buffers, so it is busy until the last
    // chunk is staged, sync or async; only that chunk's transfer is left.
    const double last_chunk_ns = static_cast<double>(std::min<std::uint64_t>(bytes, kStagingChunkBytes)) / sim.link_gbps;
    const double staged_at = stream->tail_ns - std::min(duration_ns, last_chunk_ns + kCopySetupNs);
    wait_until(sim, std::nextafter(staged_at, 0.0), nullptr);
  }

  const bool host_waits = pageable_destination || (sync == CopySync::sync && (host_destination || !pageable_source) &&
                                                   !(shape.dst_device && shape.src_device));
  return host_waits ? wait_until(sim, stream->tail_ns, context) : CUDA_SUCCESS;
}

CUresult copy_linear(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes, bool dst_device, bool src_device,
                     CUstream stream, bool per_thread_api, CopySync sync, const char* api) {
  CopyShape shape;
  shape.dst = dst;
  shape.src = src;
  shape.width = bytes;
  shape.dst_device = dst_device;
  shape.src_device = src_device;
  return copy(shape, stream, per_thread_api, sync, api);
}

CUresult fill(std::uint64_t dst, std::uint64_t pitch, std::uint64_t value, unsigned element, std::uint64_t count,
              std::uint64_t height, CUstream stream_handle, bool per_thread_api, const char* api) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count(api);
  Context* context = nullptr;
  if (CUresult r = check_context(sim, &context)) return r;
  if (count == 0 || height == 0) return CUDA_SUCCESS;
  const std::uint64_t row_bytes = count * element;
  if (height > 1 && pitch < row_bytes) return CUDA_ERROR_INVALID_VALUE;
  CopyShape shape;  // the rows, as a copy's destination
  shape.width = row_bytes;
  shape.height = height;
  const Side side{dst, pitch, 0};
  if (dst % element != 0 || !side_accessible(sim, shape, side, false)) return CUDA_ERROR_INVALID_VALUE;
  CUresult error;
  Stream* stream = resolve_stream(sim, stream_handle, per_thread_api, &error);
  if (stream == nullptr) return error;
  Operation operation;
  operation.what = "memset";
  operation.bytes = row_bytes * height;
  operation.engine = Engine::compute;
  operation.effect_at_end = true;
  operation.duration_ns = static_cast<double>(row_bytes * height) / sim.device_copy_gbps;
  const int device = context->device;
  operation.run = [shape, side, value, element, count, device, api] {
    Simulator& s = Simulator::get();
    if (!side_accessible(s, shape, side, true)) {
      record_illegal_access(s, api, first_inaccessible(s, shape, side), device);
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    for_each_row(shape, [&](std::uint64_t, std::uint64_t y) {
      auto* row = reinterpret_cast<unsigned char*>(side.base + y * side.pitch);
      if (count == 0) return;
      // The first element, then the row doubled from what is written: the
      // same bytes as one copy an element, at memcpy's speed.
      std::memcpy(row, &value, element);
      const std::uint64_t bytes = count * element;
      for (std::uint64_t written = element; written < bytes;) {
        const std::uint64_t more = std::min(written, bytes - written);
        std::memcpy(row + written, row, more);
        written += more;
      }
    });
    return CUDA_SUCCESS;
  };
  if (stream->capture == nullptr) spend_issue_time(sim, Issue::launch);  // a memset is a kernel
  return enqueue(sim, stream, std::move(operation));
}

}  // namespace vgpusim
