// Graphs built node by node: cuGraphCreate, kernel, memcpy and memset nodes
// (their own entry points and the generic cuGraphAddNode), and setting a
// node's parameters in the graph or in an instantiation. A node's work is
// recorded exactly as the same call on a capturing stream would record it:
// the ordinary launch, copy and memset paths issue it to a private stream
// that captures, so a node checks its arguments and runs as they do.
//
// Not simulated: dependencies (a graph runs its nodes in the order they were
// added, as a captured graph runs in capture order), node kinds other than
// kernel, memcpy, memset and batch memory operations
// (CUDA_ERROR_NOT_SUPPORTED), graph updates.
#include <algorithm>

#include "sim.h"

using namespace vgpusim;

namespace {

// Several recorded operations as one: each runs in turn, the first error stops them.
Operation in_order(std::vector<Operation> operations) {
  Operation combined = operations.front();
  combined.what = "batch memory operations";
  combined.call = KernelCall{};  // the batch runs through `run`, each part as it was recorded
  combined.duration_ns = 0;
  for (const Operation& op : operations) combined.duration_ns += op.duration_ns;
  combined.run = [all = std::move(operations)] {
    for (const Operation& op : all) {
      if (const CUresult r = perform(op)) return r;
    }
    return CUDA_SUCCESS;
  };
  return combined;
}

// Runs `issue(stream)` with a private stream capturing, and returns what it
// recorded as one operation (a batch of memory operations records several:
// they run in order, as one node).
template <class Issue>
CUresult record(Operation* out, Issue&& issue) {
  CUstream stream = nullptr;
  if (CUresult r = cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING)) return r;
  Capture* capture = nullptr;
  {
    Locked l;
    CUresult error;
    Stream* s = resolve_stream(l.sim, stream, false, &error);
    capture = new Capture;
    capture->id = l.sim.next_capture_id++;
    capture->origin = s;
    capture->mode = CU_STREAM_CAPTURE_MODE_RELAXED;  // a node changes nothing for other threads
    capture->thread = std::this_thread::get_id();
    capture->streams.push_back(s);
    s->capture = capture;
    l.sim.captures.push_back(capture);
  }
  CUresult result = issue(stream);
  {
    Locked l;
    if (result == CUDA_SUCCESS && capture->operations.empty()) result = CUDA_ERROR_INVALID_VALUE;
    if (result == CUDA_SUCCESS && capture->operations.size() == 1) *out = std::move(capture->operations.front());
    if (result == CUDA_SUCCESS && capture->operations.size() > 1) *out = in_order(std::move(capture->operations));
    capture->origin->capture = nullptr;
    l.sim.captures.erase(std::find(l.sim.captures.begin(), l.sim.captures.end(), capture));
    delete capture;
  }
  cuStreamDestroy_v2(stream);
  return result;
}

CUresult kernel_operation(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned shared,
                          void** params, void** extra, Operation* out) {
  return record(out, [&](CUstream s) {
    return launch(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, s, false, params, extra);
  });
}

template <class Params>
CUresult kernel_node_operation(const Params* p, CUfunction f, Operation* out) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
  const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
  return kernel_operation(f, grid, block, p->sharedMemBytes, p->kernelParams, p->extra, out);
}

CUresult kernel_v1(const CUDA_KERNEL_NODE_PARAMS_v1* p, Operation* out) {
  return kernel_node_operation(p, p != nullptr ? p->func : nullptr, out);
}
CUresult kernel_v2(const CUDA_KERNEL_NODE_PARAMS_v2* p, Operation* out) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return kernel_node_operation(p, p->func != nullptr ? p->func : reinterpret_cast<CUfunction>(p->kern), out);
}
CUresult kernel_v3(const CUDA_KERNEL_NODE_PARAMS_v3* p, Operation* out) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return kernel_node_operation(p, p->func != nullptr ? p->func : reinterpret_cast<CUfunction>(p->kern), out);
}

CUresult memcpy_operation(const CUDA_MEMCPY3D* copy, Operation* out) {
  if (copy == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return record(out, [&](CUstream s) { return cuMemcpy3DAsync_v2(copy, s); });
}

CUresult memset_operation(CUdeviceptr dst, std::size_t pitch, unsigned value, unsigned element, std::size_t width,
                          std::size_t height, Operation* out) {
  if (element != 1 && element != 2 && element != 4) return CUDA_ERROR_INVALID_VALUE;
  return record(out, [&](CUstream s) { return fill(dst, pitch, value, element, width, height, s, false, "memset node"); });
}
CUresult memset_v1(const CUDA_MEMSET_NODE_PARAMS* p, Operation* out) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return memset_operation(p->dst, p->pitch, p->value, p->elementSize, p->width, p->height, out);
}

template <class Params>
CUresult batch_operation(const Params* p, Operation* out) {
  if (p == nullptr || p->count == 0 || p->paramArray == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return record(out, [&](CUstream s) { return cuStreamBatchMemOp_v2(s, p->count, p->paramArray, p->flags); });
}

CUresult generic_operation(const CUgraphNodeParams* p, Operation* out) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return kernel_v3(&p->kernel, out);
    case CU_GRAPH_NODE_TYPE_MEMCPY: return memcpy_operation(&p->memcpy.copyParams, out);
    case CU_GRAPH_NODE_TYPE_MEMSET:
      return memset_operation(p->memset.dst, p->memset.pitch, p->memset.value, p->memset.elementSize,
                              p->memset.width, p->memset.height, out);
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: return batch_operation(&p->memOp, out);
    default: return CUDA_ERROR_NOT_SUPPORTED;
  }
}

// Appends `operation` to `graph` as a new node.
template <class Build>
CUresult add_node(CUgraphNode* node, CUgraph graph_handle, Build&& build, const char* api) {
  Simulator::get().count(api);
  if (node == nullptr) return CUDA_ERROR_INVALID_VALUE;
  {
    Locked l;
    if (l.sim.graphs.count(reinterpret_cast<Graph*>(graph_handle)) == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  Operation operation;
  if (CUresult r = build(&operation)) return r;
  Locked l;
  auto* graph = reinterpret_cast<Graph*>(graph_handle);
  if (l.sim.graphs.count(graph) == 0) return CUDA_ERROR_INVALID_VALUE;
  graph->operations.push_back(std::move(operation));
  auto* ref = new GraphNode{graph, graph->operations.size() - 1};
  l.sim.graph_nodes.insert(ref);
  *node = reinterpret_cast<CUgraphNode>(ref);
  return CUDA_SUCCESS;
}

// Replaces a node's operation in its graph, or in `exec` (an instantiation
// of that graph) when given.
template <class Build>
CUresult set_node(CUgraphExec exec_handle, CUgraphNode node, Build&& build, const char* api) {
  Simulator::get().count(api);
  Operation operation;
  if (CUresult r = build(&operation)) return r;
  Locked l;
  auto* ref = reinterpret_cast<GraphNode*>(node);
  if (l.sim.graph_nodes.count(ref) == 0) return CUDA_ERROR_INVALID_VALUE;
  Graph* target = ref->graph;
  if (exec_handle != nullptr) {
    target = reinterpret_cast<Graph*>(exec_handle);
    if (l.sim.graph_execs.count(target) == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  if (ref->index >= target->operations.size()) return CUDA_ERROR_INVALID_VALUE;
  target->operations[ref->index] = std::move(operation);
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult cuGraphCreate(CUgraph* graph, unsigned int flags) {
  Locked l;
  l.sim.count("cuGraphCreate");
  if (graph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto* created = new Graph;
  l.sim.graphs.insert(created);
  *graph = reinterpret_cast<CUgraph>(created);
  return CUDA_SUCCESS;
}

// ---- kernel nodes ---------------------------------------------------------------------
SIM_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t,
                                         const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  return add_node(node, graph, [&](Operation* op) { return kernel_v1(p, op); }, "cuGraphAddKernelNode");
}
SIM_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t,
                                            const CUDA_KERNEL_NODE_PARAMS_v2* p) {
  return add_node(node, graph, [&](Operation* op) { return kernel_v2(p, op); }, "cuGraphAddKernelNode_v2");
}
SIM_EXPORT CUresult cuGraphKernelNodeSetParams(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  return set_node(nullptr, node, [&](Operation* op) { return kernel_v1(p, op); }, "cuGraphKernelNodeSetParams");
}
SIM_EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2* p) {
  return set_node(nullptr, node, [&](Operation* op) { return kernel_v2(p, op); }, "cuGraphKernelNodeSetParams_v2");
}
SIM_EXPORT CUresult cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                   const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return set_node(exec, node, [&](Operation* op) { return kernel_v1(p, op); }, "cuGraphExecKernelNodeSetParams");
}
SIM_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                                      const CUDA_KERNEL_NODE_PARAMS_v2* p) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return set_node(exec, node, [&](Operation* op) { return kernel_v2(p, op); }, "cuGraphExecKernelNodeSetParams_v2");
}

// ---- memcpy and memset nodes ----------------------------------------------------------
SIM_EXPORT CUresult cuGraphAddMemcpyNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t,
                                         const CUDA_MEMCPY3D* copy, CUcontext) {
  return add_node(node, graph, [&](Operation* op) { return memcpy_operation(copy, op); }, "cuGraphAddMemcpyNode");
}
SIM_EXPORT CUresult cuGraphMemcpyNodeSetParams(CUgraphNode node, const CUDA_MEMCPY3D* copy) {
  return set_node(nullptr, node, [&](Operation* op) { return memcpy_operation(copy, op); },
                  "cuGraphMemcpyNodeSetParams");
}
SIM_EXPORT CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec exec, CUgraphNode node, const CUDA_MEMCPY3D* copy,
                                                   CUcontext) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return set_node(exec, node, [&](Operation* op) { return memcpy_operation(copy, op); },
                  "cuGraphExecMemcpyNodeSetParams");
}
SIM_EXPORT CUresult cuGraphAddMemsetNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t,
                                         const CUDA_MEMSET_NODE_PARAMS* p, CUcontext) {
  return add_node(node, graph, [&](Operation* op) { return memset_v1(p, op); }, "cuGraphAddMemsetNode");
}
SIM_EXPORT CUresult cuGraphMemsetNodeSetParams(CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* p) {
  return set_node(nullptr, node, [&](Operation* op) { return memset_v1(p, op); }, "cuGraphMemsetNodeSetParams");
}
SIM_EXPORT CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                   const CUDA_MEMSET_NODE_PARAMS* p, CUcontext) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return set_node(exec, node, [&](Operation* op) { return memset_v1(p, op); }, "cuGraphExecMemsetNodeSetParams");
}

// ---- generic nodes --------------------------------------------------------------------
SIM_EXPORT CUresult cuGraphAddNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t,
                                   CUgraphNodeParams* p) {
  return add_node(node, graph, [&](Operation* op) { return generic_operation(p, op); }, "cuGraphAddNode");
}
SIM_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode*, const CUgraphEdgeData*,
                                      size_t, CUgraphNodeParams* p) {
  return add_node(node, graph, [&](Operation* op) { return generic_operation(p, op); }, "cuGraphAddNode_v2");
}
SIM_EXPORT CUresult cuGraphNodeSetParams(CUgraphNode node, CUgraphNodeParams* p) {
  return set_node(nullptr, node, [&](Operation* op) { return generic_operation(p, op); }, "cuGraphNodeSetParams");
}
SIM_EXPORT CUresult cuGraphExecNodeSetParams(CUgraphExec exec, CUgraphNode node, CUgraphNodeParams* p) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return set_node(exec, node, [&](Operation* op) { return generic_operation(p, op); }, "cuGraphExecNodeSetParams");
}

// ---- batch memory operation nodes -----------------------------------------------------
SIM_EXPORT CUresult cuGraphAddBatchMemOpNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t,
                                             const CUDA_BATCH_MEM_OP_NODE_PARAMS* p) {
  return add_node(node, graph, [&](Operation* op) { return batch_operation(p, op); }, "cuGraphAddBatchMemOpNode");
}
SIM_EXPORT CUresult cuGraphBatchMemOpNodeSetParams(CUgraphNode node, const CUDA_BATCH_MEM_OP_NODE_PARAMS* p) {
  return set_node(nullptr, node, [&](Operation* op) { return batch_operation(p, op); },
                  "cuGraphBatchMemOpNodeSetParams");
}
SIM_EXPORT CUresult cuGraphExecBatchMemOpNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                       const CUDA_BATCH_MEM_OP_NODE_PARAMS* p) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return set_node(exec, node, [&](Operation* op) { return batch_operation(p, op); },
                  "cuGraphExecBatchMemOpNodeSetParams");
}
