// Stream memory operations: cuStreamWriteValue32/64, cuStreamWaitValue32/64
// and cuStreamBatchMemOp, in their v1, _v2 and per-thread forms. A write is
// a one-word memset on the stream. A wait reads its word when the stream
// reaches it, so an access to memory that is not mapped faults as a kernel's
// would; it does not block (nothing else in the simulator could satisfy it
// later), and a condition that does not hold is counted as
// "stream_waits_unmet" in the report's call counts.
#include <cstring>

#include "sim.h"

using namespace vgpusim;

namespace {

CUresult write_value(CUstream stream, CUdeviceptr address, std::uint64_t value, unsigned bytes, bool per_thread,
                     const char* api) {
  if (address % bytes != 0) return CUDA_ERROR_INVALID_VALUE;
  return fill(address, 0, value, bytes, 1, 1, stream, per_thread, api);
}

bool condition_holds(std::uint64_t word, std::uint64_t value, unsigned flags, unsigned bytes) {
  if (bytes == 4) {
    word &= 0xFFFF'FFFFu;
    value &= 0xFFFF'FFFFu;
  }
  switch (flags & 0xF) {
    case CU_STREAM_WAIT_VALUE_GEQ:
      return bytes == 4 ? static_cast<std::int32_t>(static_cast<std::uint32_t>(word - value)) >= 0
                        : static_cast<std::int64_t>(word - value) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return word == value;
    case CU_STREAM_WAIT_VALUE_AND: return (word & value) != 0;
    case CU_STREAM_WAIT_VALUE_NOR: return ~(word | value) != 0;
    default: return false;
  }
}

CUresult wait_value(CUstream stream_handle, CUdeviceptr address, std::uint64_t value, unsigned bytes, unsigned flags,
                    bool per_thread, const char* api) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count(api);
  Context* context = nullptr;
  if (CUresult r = check_context(sim, &context)) return r;
  if (address % bytes != 0 || (flags & 0xF) > CU_STREAM_WAIT_VALUE_NOR || !sim.accessible(address, bytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult error;
  Stream* stream = resolve_stream(sim, stream_handle, per_thread, &error);
  if (stream == nullptr) return error;
  Operation operation;
  operation.what = "wait value";
  operation.engine = Engine::compute;
  const int device = context->device;
  operation.run = [address, value, bytes, flags, device, api] {
    Simulator& s = Simulator::get();
    if (!s.accessible(address, bytes, true)) {
      record_illegal_access(s, api, address, device);
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    std::uint64_t word = 0;
    std::memcpy(&word, reinterpret_cast<const void*>(address), bytes);
    if (!condition_holds(word, value, flags, bytes)) s.count("stream_waits_unmet");
    return CUDA_SUCCESS;
  };
  return enqueue(sim, stream, std::move(operation));
}

CUresult batch(CUstream stream, unsigned count, CUstreamBatchMemOpParams* ops, unsigned flags, bool per_thread,
               const char* api) {
  if (count == 0 || ops == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; ++i) {
    const CUstreamBatchMemOpParams& op = ops[i];
    CUresult result = CUDA_SUCCESS;
    switch (op.operation) {
      case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        result = write_value(stream, op.writeValue.address, op.writeValue.value, 4, per_thread, api);
        break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        result = write_value(stream, op.writeValue.address, op.writeValue.value64, 8, per_thread, api);
        break;
      case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        result = wait_value(stream, op.waitValue.address, op.waitValue.value, 4, op.waitValue.flags, per_thread, api);
        break;
      case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        result = wait_value(stream, op.waitValue.address, op.waitValue.value64, 8, op.waitValue.flags, per_thread, api);
        break;
      case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
      case CU_STREAM_MEM_OP_BARRIER:
        break;  // ordering only: the simulator's streams are already in order
      default: return CUDA_ERROR_INVALID_VALUE;
    }
    if (result != CUDA_SUCCESS) return result;
  }
  return CUDA_SUCCESS;
}

}  // namespace

#define SIM_STREAM_WORD_OPS(suffix, per_thread)                                                                   \
  SIM_EXPORT CUresult cuStreamWriteValue32##suffix(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned int f) {     \
    return f & ~CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER ? CUDA_ERROR_INVALID_VALUE                               \
                                                        : write_value(s, a, v, 4, per_thread, "cuStreamWriteValue32" #suffix); \
  }                                                                                                               \
  SIM_EXPORT CUresult cuStreamWriteValue64##suffix(CUstream s, CUdeviceptr a, cuuint64_t v, unsigned int f) {     \
    return f & ~CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER ? CUDA_ERROR_INVALID_VALUE                               \
                                                        : write_value(s, a, v, 8, per_thread, "cuStreamWriteValue64" #suffix); \
  }                                                                                                               \
  SIM_EXPORT CUresult cuStreamWaitValue32##suffix(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned int f) {      \
    return wait_value(s, a, v, 4, f, per_thread, "cuStreamWaitValue32" #suffix);                                  \
  }                                                                                                               \
  SIM_EXPORT CUresult cuStreamWaitValue64##suffix(CUstream s, CUdeviceptr a, cuuint64_t v, unsigned int f) {      \
    return wait_value(s, a, v, 8, f, per_thread, "cuStreamWaitValue64" #suffix);                                  \
  }                                                                                                               \
  SIM_EXPORT CUresult cuStreamBatchMemOp##suffix(CUstream s, unsigned int n, CUstreamBatchMemOpParams* p,         \
                                                 unsigned int f) {                                                \
    return batch(s, n, p, f, per_thread, "cuStreamBatchMemOp" #suffix);                                          \
  }
SIM_STREAM_WORD_OPS(, false)
SIM_STREAM_WORD_OPS(_ptsz, true)
SIM_STREAM_WORD_OPS(_v2, false)
SIM_STREAM_WORD_OPS(_v2_ptsz, true)
