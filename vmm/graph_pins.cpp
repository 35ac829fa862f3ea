// Graphs built node by node (cuGraphAddKernelNode, cuGraphAddMemcpyNode,
// cuGraphAddMemsetNode, cuGraphAddNode and their SetParams forms): the
// memory a node names is used at every launch of the graph, which passes no
// hook node by node. It is pinned resident for as long as it lives, like the
// work of a captured stream (launch_gate.cpp), found the way a launch finds
// it: argument words, one level of pointer tables, copy ranges. A range
// exported as a dma-buf is pinned the same way (pin_range_for_life).
#include "vmm/pager.h"
#include "vmm/pager_device_state.h"

namespace vgpumem::vmm {

// The units gathered into `access` (held, so none is freed meanwhile),
// pinned for life.
CUresult Pager::pin_held_for_life(Access& access, LifetimePin why) {
  if (access.size() == 0) return CUDA_SUCCESS;
  access.drop_duplicates_from(0);
  access.hold_new();
  return pin_units_for_life(access.data(), access.size(), why);
}

CUresult Pager::pin_range_for_life(std::uint64_t address, std::uint64_t bytes, LifetimePin why) {
  Access access;
  add_named_by_range(address, bytes, access, Extent::whole);
  return pin_held_for_life(access, why);
}

CUresult Pager::pin_graph_words(const std::uint64_t* words, std::size_t count) {
  Access access;
  add_named_by_words(words, count, access);
  return pin_held_for_life(access, LifetimePin::graph_node);
}

CUresult Pager::pin_graph_range(std::uint64_t address, std::uint64_t bytes) {
  return pin_range_for_life(address, bytes, LifetimePin::graph_node);
}

CUresult Pager::pin_graph_device(int device) {
  Access access;
  {
    MutexLock lock(mutex_);
    if (auto it = devices_.find(device); it != devices_.end()) {
      for (const auto& unit : it->second->units) {
        if (!unit->retired) access.add(unit.get());
      }
    }
  }
  return pin_held_for_life(access, LifetimePin::graph_node);
}

}  // namespace vgpumem::vmm
