// cudnnBackendExecute: walks plan -> engine config -> engine -> operation
// graph -> operations, finds each operand's pointer in the variant pack by
// its tensor's unique id, and launches one simulated kernel per operation on
// the handle's stream. Everything is checked before the first launch, so a
// refused call launches and writes nothing.
#include <vector>

#include "api_export.h"
#include "backend_descriptor.h"
#include "dnn_context.h"
#include "dnn_kernels.h"

namespace vgpusim_dnn {
namespace {

// The pointer the pack gives `tensor`, or nullptr when it gives none.
void* pointer_for(const BackendDescriptor& pack, const BackendDescriptor& tensor) {
  for (std::size_t i = 0; i < pack.unique_ids.size(); ++i)
    if (pack.unique_ids[i] == tensor.tensor.uid) return pack.data_pointers[i];
  return nullptr;
}

cudnnStatus_t execute(cudnnHandle_t handle, const BackendDescriptor& plan, const BackendDescriptor& pack) {
  const BackendDescriptor& graph = *plan.engine_config->engine->graph;
  const std::int64_t workspace = workspace_bytes_of(*plan.engine_config);
  if (workspace > 0 && pack.workspace == nullptr) return CUDNN_STATUS_BAD_PARAM;
  std::vector<std::pair<ConvKind, ConvOperation>> launches;
  for (const DescriptorSnapshot& op : graph.ops) {
    ConvOperation problem = op->operation.problem;
    void* x = pointer_for(pack, *op->operation.x);
    void* w = pointer_for(pack, *op->operation.w);
    void* y = pointer_for(pack, *op->operation.y);
    if (x == nullptr || w == nullptr || y == nullptr) return CUDNN_STATUS_BAD_PARAM;
    problem.x = reinterpret_cast<CUdeviceptr>(x);
    problem.w = reinterpret_cast<CUdeviceptr>(w);
    problem.y = reinterpret_cast<CUdeviceptr>(y);
    problem.workspace = reinterpret_cast<CUdeviceptr>(pack.workspace);
    problem.workspace_bytes = pack.workspace != nullptr ? static_cast<std::uint64_t>(workspace) : 0;
    problem.alpha = static_cast<float>(op->operation.alpha);
    problem.beta = static_cast<float>(op->operation.beta);
    launches.emplace_back(convolution_kind(op->type), problem);
  }
  for (const auto& [kind, problem] : launches) {
    if (const cudnnStatus_t status = launch_convolution(kind, problem, handle->stream);
        status != CUDNN_STATUS_SUCCESS) {
      return status;
    }
  }
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace
}  // namespace vgpusim_dnn

VGPUSIM_CUDNN_API cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                                    cudnnBackendDescriptor_t variant_pack) {
  if (!vgpusim_dnn::is_live(handle)) return CUDNN_STATUS_BAD_PARAM;
  const vgpusim_dnn::BackendDescriptor* p = vgpusim_dnn::live_descriptor(plan);
  const vgpusim_dnn::BackendDescriptor* v = vgpusim_dnn::live_descriptor(variant_pack);
  if (p == nullptr || v == nullptr || p->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR ||
      v->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  if (!p->finalized || !v->finalized) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
  return vgpusim_dnn::execute(handle, *p, *v);
}
