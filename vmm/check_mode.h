// How hard paging checks itself (VGPUMEM_CHECK; docs/configuration.md,
// "Checking modes").
#pragma once

#include <cstdint>

// Note [Checking modes]
// ~~~~~~~~~~~~~~~~~~~~~
// `VGPUMEM_CHECK`: `fast` reuses an offloaded unit's
// chunks at once (ordered after the save); `strict` only once its range is
// unmapped; `torture` also offloads everything an operation does not name
// before it. See docs/configuration.md#vgpumem_check.

namespace vgpumem::vmm {

enum class CheckMode : std::uint8_t {
  // An offloaded unit's chunks serve their next owner at once, its work
  // ordered after the copy that saves them; the old range stays mapped
  // until the save completes. An access no hook saw may read another
  // buffer's bytes in that window.
  fast,
  // Chunks are reused only once the offloaded range is unmapped: an access
  // no hook saw faults (CUDA_ERROR_ILLEGAL_ADDRESS) instead.
  strict,
  // strict, and before every launch and copy every unit it does not name is
  // offloaded, so an access outside the rules faults at once. Slow: for
  // proving a program (or a library's kernels) safe on small inputs.
  torture,
};

}  // namespace vgpumem::vmm
