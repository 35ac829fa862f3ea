// Graphs built node by node (XLA's command buffers, cuDNN's graph API): a
// kernel, memcpy, memset or batch memory operation node names memory that every launch of the graph
// then uses without passing a hook, so the memory is pinned resident for as
// long as it lives (Pager::pin_graph_*, LifetimePin::graph_node), before the
// node is added or changed, exactly as work on a capturing stream is. A
// kernel's parameters are read as a launch's are (words, tensor maps, one
// level of pointer tables); one whose parameters the driver cannot describe
// pins everything paged on its device. If the memory cannot be made
// resident, the call fails with CUDA_ERROR_OUT_OF_MEMORY and the graph is
// left as it was. cuGraphExecUpdate copies parameters from a graph whose
// nodes were pinned when they were set, so it needs no hook.
#include <cstdint>
#include <vector>

#include "interpose/copy_operands.h"
#include "interpose/hook_support.h"

// Note [Graphs built node by node]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Graphs built node by node (`interpose/hooks_graph.cpp`,
// `vmm/graph_pins.cpp`): XLA's command buffers and cuDNN's graph API add
// kernel, memcpy, memset and batch memory operation nodes directly
// (`cuGraphAddKernelNode`, `cuGraphAddMemcpyNode`, `cuGraphAddMemsetNode`,
// `cuGraphAddBatchMemOpNode`, the generic `cuGraphAddNode`, and the
// `SetParams` forms on a graph or an instantiation). Every launch of such a graph replays them with no hook in
// between, so what a node names is pinned resident for life
// (`LifetimePin::graph_node`) before the node is added or changed, as work on
// a capturing stream is: a kernel node's parameters are read as a launch's are
// (words, tensor maps, one level of pointer tables; a kernel the driver cannot
// describe pins its whole device), copy and memset nodes pin their ranges, and
// batch memory operation nodes the words they write and wait on.
// If the memory cannot be made resident the call is `CUDA_ERROR_OUT_OF_MEMORY`
// and the graph is unchanged. `cuGraphExecUpdate` copies parameters from a
// graph whose nodes were pinned already.

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

// Pins what a kernel node's parameters name.
CUresult pin_kernel(CUfunction function, void** params, void** extra) {
  Runtime& runtime = Runtime::get();
  vmm::Pager* pager = runtime.pager();
  if (pager == nullptr || function == nullptr) return CUDA_SUCCESS;
  thread_local std::vector<std::uint64_t> words(512);
  vmm::LaunchArgs::Scan scan = runtime.launch_args().scan(function, params, extra, words.data(), words.size());
  if (scan.readable && scan.count > words.size()) {
    words.resize(scan.count);
    scan = runtime.launch_args().scan(function, params, extra, words.data(), words.size());
  }
  if (!scan.readable) return pager->pin_graph_device(current_device());
  if (const CUresult result = pager->pin_graph_words(words.data(), scan.count)) return result;
  CUresult result = CUDA_SUCCESS;
  runtime.tensor_maps().find_in_launch(scan.kernel != nullptr ? &scan.kernel->sizes : nullptr, params, extra,
                                       words.data(), scan.count, [&](const vmm::TensorMapRange& range) {
                                         if (result == CUDA_SUCCESS) {
                                           result = pager->pin_graph_range(range.address, range.bytes);
                                         }
                                       });
  return result;
}

// A kernel node's parameters of any version: the function, or the library
// kernel when no function is given.
template <typename Params>
CUresult pin_kernel_node(const Params* p) {
  if (p == nullptr) return CUDA_SUCCESS;
  if constexpr (requires { p->kern; }) {
    return pin_kernel(p->func != nullptr ? p->func : reinterpret_cast<CUfunction>(p->kern), p->kernelParams,
                      p->extra);
  } else {
    return pin_kernel(p->func, p->kernelParams, p->extra);
  }
}

CUresult pin_range(const Span& span) {
  vmm::Pager* pager = Runtime::get().pager();
  return pager == nullptr || span.bytes == 0 ? CUDA_SUCCESS : pager->pin_graph_range(span.first, span.bytes);
}

CUresult pin_memcpy_node(const CUDA_MEMCPY3D* c) {
  if (c == nullptr) return CUDA_SUCCESS;
  if (const CUresult result = pin_range(destination_of(*c))) return result;
  return pin_range(source_of(*c));
}

template <typename Params>
CUresult pin_memset_node(const Params* p) {
  if (p == nullptr) return CUDA_SUCCESS;
  return pin_range({p->dst, rows_bytes(p->pitch, p->width, p->height, p->elementSize)});
}

// The words a batch memory operation node writes and waits on.
template <typename Params>
CUresult pin_batch_node(const Params* p) {
  if (p == nullptr || p->paramArray == nullptr) return CUDA_SUCCESS;
  for (unsigned i = 0; i < p->count; ++i) {
    const CUstreamBatchMemOpParams& op = p->paramArray[i];
    Span word;
    switch (op.operation) {
      case CU_STREAM_MEM_OP_WAIT_VALUE_32: word = {op.waitValue.address, 4}; break;
      case CU_STREAM_MEM_OP_WAIT_VALUE_64: word = {op.waitValue.address, 8}; break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_32: word = {op.writeValue.address, 4}; break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_64: word = {op.writeValue.address, 8}; break;
      default: continue;  // barriers and flushes name no memory
    }
    if (const CUresult result = pin_range(word)) return result;
  }
  return CUDA_SUCCESS;
}

CUresult pin_generic_node(const CUgraphNodeParams* p) {
  if (p == nullptr) return CUDA_SUCCESS;
  switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return pin_kernel_node(&p->kernel);
    case CU_GRAPH_NODE_TYPE_MEMCPY: return pin_memcpy_node(&p->memcpy.copyParams);
    case CU_GRAPH_NODE_TYPE_MEMSET: return pin_memset_node(&p->memset);
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: return pin_batch_node(&p->memOp);
    default: return CUDA_SUCCESS;  // host, event, child graph, allocation nodes: no paged memory named
  }
}

// Forwards the call once what the node names is pinned.
template <typename Forward>
CUresult pinned_then(CUresult pinned, Forward&& forward) {
  return pinned != CUDA_SUCCESS ? pinned : forward();
}

}  // namespace

// ---- kernel nodes ---------------------------------------------------------------------------
VGPUMEM_HOOK_DEFINE(cuGraphAddKernelNode,
                    (CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t count, const CUDA_KERNEL_NODE_PARAMS_v1* p),
                    (node, graph, deps, count, p)) {
  return pinned_then(pin_kernel_node(p),
                     [&] { return REAL(cuGraphAddKernelNode)(node, graph, deps, count, p); });
}
VGPUMEM_HOOK_DEFINE(cuGraphAddKernelNode_v2,
                    (CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t count, const CUDA_KERNEL_NODE_PARAMS_v2* p),
                    (node, graph, deps, count, p)) {
  return pinned_then(pin_kernel_node(p),
                     [&] { return REAL(cuGraphAddKernelNode_v2)(node, graph, deps, count, p); });
}
VGPUMEM_HOOK_DEFINE(cuGraphKernelNodeSetParams, (CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* p), (node, p)) {
  return pinned_then(pin_kernel_node(p),
                     [&] { return REAL(cuGraphKernelNodeSetParams)(node, p); });
}
VGPUMEM_HOOK_DEFINE(cuGraphKernelNodeSetParams_v2, (CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2* p), (node, p)) {
  return pinned_then(pin_kernel_node(p),
                     [&] { return REAL(cuGraphKernelNodeSetParams_v2)(node, p); });
}
VGPUMEM_HOOK_DEFINE(cuGraphExecKernelNodeSetParams,
                    (CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* p), (exec, node, p)) {
  return pinned_then(pin_kernel_node(p),
                     [&] { return REAL(cuGraphExecKernelNodeSetParams)(exec, node, p); });
}
VGPUMEM_HOOK_DEFINE(cuGraphExecKernelNodeSetParams_v2,
                    (CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2* p), (exec, node, p)) {
  return pinned_then(pin_kernel_node(p),
                     [&] { return REAL(cuGraphExecKernelNodeSetParams_v2)(exec, node, p); });
}

// ---- memcpy and memset nodes ----------------------------------------------------------------
VGPUMEM_HOOK_DEFINE(cuGraphAddMemcpyNode,
                    (CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t count, const CUDA_MEMCPY3D* c, CUcontext ctx),
                    (node, graph, deps, count, c, ctx)) {
  return pinned_then(pin_memcpy_node(c),
                     [&] { return REAL(cuGraphAddMemcpyNode)(node, graph, deps, count, c, ctx); });
}
VGPUMEM_HOOK_DEFINE(cuGraphMemcpyNodeSetParams, (CUgraphNode node, const CUDA_MEMCPY3D* c), (node, c)) {
  return pinned_then(pin_memcpy_node(c),
                     [&] { return REAL(cuGraphMemcpyNodeSetParams)(node, c); });
}
VGPUMEM_HOOK_DEFINE(cuGraphExecMemcpyNodeSetParams,
                    (CUgraphExec exec, CUgraphNode node, const CUDA_MEMCPY3D* c, CUcontext ctx), (exec, node, c, ctx)) {
  return pinned_then(pin_memcpy_node(c),
                     [&] { return REAL(cuGraphExecMemcpyNodeSetParams)(exec, node, c, ctx); });
}
VGPUMEM_HOOK_DEFINE(cuGraphAddMemsetNode,
                    (CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t count, const CUDA_MEMSET_NODE_PARAMS* p, CUcontext ctx),
                    (node, graph, deps, count, p, ctx)) {
  return pinned_then(pin_memset_node(p),
                     [&] { return REAL(cuGraphAddMemsetNode)(node, graph, deps, count, p, ctx); });
}
VGPUMEM_HOOK_DEFINE(cuGraphMemsetNodeSetParams, (CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* p), (node, p)) {
  return pinned_then(pin_memset_node(p),
                     [&] { return REAL(cuGraphMemsetNodeSetParams)(node, p); });
}
VGPUMEM_HOOK_DEFINE(cuGraphExecMemsetNodeSetParams,
                    (CUgraphExec exec, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* p, CUcontext ctx),
                    (exec, node, p, ctx)) {
  return pinned_then(pin_memset_node(p),
                     [&] { return REAL(cuGraphExecMemsetNodeSetParams)(exec, node, p, ctx); });
}

// ---- generic nodes --------------------------------------------------------------------------
VGPUMEM_HOOK_DEFINE(cuGraphAddNode,
                    (CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t count, CUgraphNodeParams* p),
                    (node, graph, deps, count, p)) {
  return pinned_then(pin_generic_node(p),
                     [&] { return REAL(cuGraphAddNode)(node, graph, deps, count, p); });
}
VGPUMEM_HOOK_DEFINE(cuGraphAddNode_v2,
                    (CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, const CUgraphEdgeData* edges, size_t count, CUgraphNodeParams* p),
                    (node, graph, deps, edges, count, p)) {
  return pinned_then(pin_generic_node(p),
                     [&] { return REAL(cuGraphAddNode_v2)(node, graph, deps, edges, count, p); });
}
VGPUMEM_HOOK_DEFINE(cuGraphNodeSetParams, (CUgraphNode node, CUgraphNodeParams* p), (node, p)) {
  return pinned_then(pin_generic_node(p), [&] { return REAL(cuGraphNodeSetParams)(node, p); });
}
VGPUMEM_HOOK_DEFINE(cuGraphExecNodeSetParams, (CUgraphExec exec, CUgraphNode node, CUgraphNodeParams* p),
                    (exec, node, p)) {
  return pinned_then(pin_generic_node(p),
                     [&] { return REAL(cuGraphExecNodeSetParams)(exec, node, p); });
}

// ---- batch memory operation nodes -----------------------------------------------------------
VGPUMEM_HOOK_DEFINE(cuGraphAddBatchMemOpNode,
                    (CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t count, const CUDA_BATCH_MEM_OP_NODE_PARAMS* p),
                    (node, graph, deps, count, p)) {
  return pinned_then(pin_batch_node(p),
                     [&] { return REAL(cuGraphAddBatchMemOpNode)(node, graph, deps, count, p); });
}
VGPUMEM_HOOK_DEFINE(cuGraphBatchMemOpNodeSetParams, (CUgraphNode node, const CUDA_BATCH_MEM_OP_NODE_PARAMS* p),
                    (node, p)) {
  return pinned_then(pin_batch_node(p),
                     [&] { return REAL(cuGraphBatchMemOpNodeSetParams)(node, p); });
}
VGPUMEM_HOOK_DEFINE(cuGraphExecBatchMemOpNodeSetParams,
                    (CUgraphExec exec, CUgraphNode node, const CUDA_BATCH_MEM_OP_NODE_PARAMS* p), (exec, node, p)) {
  return pinned_then(pin_batch_node(p),
                     [&] { return REAL(cuGraphExecBatchMemOpNodeSetParams)(exec, node, p); });
}
