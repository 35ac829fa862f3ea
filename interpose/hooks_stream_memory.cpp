// Stream memory operations: cuStreamWriteValue32/64, cuStreamWaitValue32/64
// and cuStreamBatchMemOp (v1, _v2 and per-thread forms). Each names device
// words the GPU reads or writes when the stream reaches it, with no kernel
// launch the scanner would see: every word is made resident and held so
// until the operation is enqueued, all of a batch's words at once (NCCL and
// DeepEP signal through such words between kernels).
#include "interpose/hook_support.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

constexpr bool kLegacy = false, kPerThread = true;

template <typename Op>
CUresult word_operation(HookId id, CUstream stream, CUdeviceptr address, std::uint64_t bytes, bool writes,
                        bool per_thread, Op&& op) {
  if (writes) register_overwrite(address, bytes);
  vmm::Access access;
  if (CUresult r = paged_operand(address, bytes, stream, per_thread, access, api_name(id))) return r;
  return op();
}

// The word one operation of a batch names; none for barriers and flushes.
struct Word {
  CUdeviceptr address = 0;
  std::uint64_t bytes = 0;
  bool writes = false;
};

Word word_of(const CUstreamBatchMemOpParams& op) {
  switch (op.operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32: return {op.waitValue.address, 4, false};
    case CU_STREAM_MEM_OP_WAIT_VALUE_64: return {op.waitValue.address, 8, false};
    case CU_STREAM_MEM_OP_WRITE_VALUE_32: return {op.writeValue.address, 4, true};
    case CU_STREAM_MEM_OP_WRITE_VALUE_64: return {op.writeValue.address, 8, true};
    default: return {};
  }
}

template <typename Op>
CUresult batch(HookId id, CUstream stream, unsigned count, const CUstreamBatchMemOpParams* ops, bool per_thread,
               Op&& op) {
  if (ops == nullptr) return op();
  vmm::Access access;
  for (unsigned i = 0; i < count; ++i) {
    const Word word = word_of(ops[i]);
    if (word.bytes == 0) continue;
    if (word.writes) register_overwrite(word.address, word.bytes);
    if (CUresult r = paged_operand(word.address, word.bytes, stream, per_thread, access, api_name(id))) return r;
  }
  return op();
}

}  // namespace

#define VGPUMEM_STREAM_WORD(name, value_type, bytes, writes, per_thread)                                             \
  VGPUMEM_HOOK_DEFINE(name, (CUstream s, CUdeviceptr a, value_type v, unsigned int f), (s, a, v, f)) {                \
    return word_operation(HookId::name, s, a, bytes, writes, per_thread, [&] { return REAL(name)(s, a, v, f); });     \
  }
#define VGPUMEM_STREAM_WORDS(suffix, per_thread)                                                                      \
  VGPUMEM_STREAM_WORD(cuStreamWriteValue32##suffix, cuuint32_t, 4, true, per_thread)                                  \
  VGPUMEM_STREAM_WORD(cuStreamWriteValue64##suffix, cuuint64_t, 8, true, per_thread)                                  \
  VGPUMEM_STREAM_WORD(cuStreamWaitValue32##suffix, cuuint32_t, 4, false, per_thread)                                  \
  VGPUMEM_STREAM_WORD(cuStreamWaitValue64##suffix, cuuint64_t, 8, false, per_thread)                                  \
  VGPUMEM_HOOK_DEFINE(cuStreamBatchMemOp##suffix, (CUstream s, unsigned int n, CUstreamBatchMemOpParams* p, unsigned int f), \
                      (s, n, p, f)) {                                                                                 \
    return batch(HookId::cuStreamBatchMemOp##suffix, s, n, p, per_thread,                                             \
                 [&] { return REAL(cuStreamBatchMemOp##suffix)(s, n, p, f); });                                       \
  }
VGPUMEM_STREAM_WORDS(, kLegacy)
VGPUMEM_STREAM_WORDS(_ptsz, kPerThread)
VGPUMEM_STREAM_WORDS(_v2, kLegacy)
VGPUMEM_STREAM_WORDS(_v2_ptsz, kPerThread)
