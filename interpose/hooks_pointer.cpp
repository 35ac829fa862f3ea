// Pointer queries on paged memory answer as they would for the cuMemAlloc
// allocation the program asked for. The driver sees only the pager's arena:
// left alone, a range query would return the whole reservation (1 TiB), and
// code that finds an allocation's base this way (IPC, NCCL registration,
// allocators) would compute nonsense. The other attributes are the driver's,
// asked with the allocation mapped: an offloaded range is not, and what the
// driver says of an unmapped address is not something to rely on.
#include "interpose/hook_support.h"

// Note [Pointer queries answer for allocations]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Pointer queries see allocations, not the arena: `cuMemGetAddressRange` and
// the range attributes of `cuPointerGetAttribute(s)` answer from the pager's
// table with the allocation's start and size (the driver would answer with the
// 1 TiB reservation); other attributes are the driver's, asked with the
// allocation mapped. An address in a mapping of the program's own handle is
// the driver's to answer, once the unit is mapped.

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

struct PagedRange {
  std::uint64_t start = 0, bytes = 0;
};

// What `address` is to the pager: not its, a live or freed paged
// allocation, or a mapping of the program's own whose handle it pages (the
// driver answers for that one, once it is mapped).
enum class Paged { no, live, freed, program_mapping };

Paged paged_range(CUdeviceptr address, PagedRange* range) {
  vmm::Pager* pager = Runtime::get().pager();
  if (pager == nullptr) return Paged::no;
  if (!pager->in_arena(address)) return pager->owns(address) ? Paged::program_mapping : Paged::no;
  // In the arena but in no live allocation: freed, as far as the program knows.
  return pager->allocation_range(address, &range->start, &range->bytes) ? Paged::live : Paged::freed;
}

// Maps the unit holding `address` if it is on the host (on the legacy
// stream, as a synchronous query would be ordered).
CUresult mapped_for_query(CUdeviceptr address) {
  vmm::Access access;
  return paged_operand(address, 1, nullptr, false, access);
}

// Fills a range attribute from the paged allocation; false for any other.
bool answer_range(CUpointer_attribute attribute, void* data, const PagedRange& range) {
  if (data == nullptr) return false;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data) = range.start; return true;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data) = range.bytes; return true;
    default: return false;
  }
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuMemGetAddressRange_v2, (CUdeviceptr* base, size_t* size, CUdeviceptr dptr), (base, size, dptr)) {
  PagedRange range;
  switch (paged_range(dptr, &range)) {
    case Paged::no: return REAL(cuMemGetAddressRange_v2)(base, size, dptr);
    case Paged::program_mapping:
      if (CUresult r = mapped_for_query(dptr)) return r;
      return REAL(cuMemGetAddressRange_v2)(base, size, dptr);
    case Paged::freed: return CUDA_ERROR_NOT_FOUND;
    case Paged::live: break;
  }
  if (base != nullptr) *base = range.start;
  if (size != nullptr) *size = range.bytes;
  return CUDA_SUCCESS;
}

VGPUMEM_HOOK_DEFINE(cuPointerGetAttribute,
                    (void* data, CUpointer_attribute attribute, CUdeviceptr ptr),
                    (data, attribute, ptr)) {
  PagedRange range;
  switch (paged_range(ptr, &range)) {
    case Paged::no: return REAL(cuPointerGetAttribute)(data, attribute, ptr);
    case Paged::program_mapping:
      if (CUresult r = mapped_for_query(ptr)) return r;
      return REAL(cuPointerGetAttribute)(data, attribute, ptr);
    case Paged::freed: return CUDA_ERROR_INVALID_VALUE;  // as for freed cuMemAlloc memory
    case Paged::live: break;
  }
  if (answer_range(attribute, data, range)) return CUDA_SUCCESS;
  if (CUresult r = mapped_for_query(ptr)) return r;
  return REAL(cuPointerGetAttribute)(data, attribute, ptr);
}

VGPUMEM_HOOK_DEFINE(cuPointerGetAttributes,
                    (unsigned count, CUpointer_attribute* attributes, void** data, CUdeviceptr ptr),
                    (count, attributes, data, ptr)) {
  PagedRange range;
  const Paged paged = paged_range(ptr, &range);
  if (paged == Paged::program_mapping) {
    if (CUresult r = mapped_for_query(ptr)) return r;
    return REAL(cuPointerGetAttributes)(count, attributes, data, ptr);
  }
  if (paged != Paged::live) {
    // A freed paged address is asked of the driver as an address it does not
    // know: outside the arena, where the answers are those for unknown memory.
    return REAL(cuPointerGetAttributes)(count, attributes, data, paged == Paged::freed ? 0 : ptr);
  }
  if (CUresult r = mapped_for_query(ptr)) return r;
  const CUresult result = REAL(cuPointerGetAttributes)(count, attributes, data, ptr);
  if (result != CUDA_SUCCESS || attributes == nullptr || data == nullptr) return result;
  for (unsigned i = 0; i < count; ++i) answer_range(attributes[i], data[i], range);
  return result;
}
