// cudnnBackendCreateDescriptor and cudnnBackendDestroyDescriptor, and the
// set of descriptors alive now.
#include "api_export.h"
#include "backend_descriptor.h"
#include "live_handles.h"

namespace vgpusim_dnn {
namespace {

vgpusim_blas::LiveHandles<BackendDescriptor>& live_descriptors() {
  static vgpusim_blas::LiveHandles<BackendDescriptor> descriptors;
  return descriptors;
}

}  // namespace

bool is_supported_descriptor_type(cudnnBackendDescriptorType_t type) {
  switch (type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
      return true;
    default:
      return false;
  }
}

ConvKind convolution_kind(cudnnBackendDescriptorType_t type) {
  if (type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR) return ConvKind::kBackwardData;
  if (type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR) return ConvKind::kBackwardFilter;
  return ConvKind::kForward;
}

DescriptorSnapshot heuristic_result(const BackendDescriptor& heuristics) {
  auto engine = std::make_shared<BackendDescriptor>();
  engine->type = CUDNN_BACKEND_ENGINE_DESCRIPTOR;
  engine->graph = heuristics.graph;
  engine->has_global_index = true;
  engine->global_index = 0;
  engine->finalized = true;
  auto config = std::make_shared<BackendDescriptor>();
  config->type = CUDNN_BACKEND_ENGINECFG_DESCRIPTOR;
  config->engine = std::move(engine);
  config->finalized = true;
  return config;
}

BackendDescriptor* live_descriptor(cudnnBackendDescriptor_t descriptor) {
  auto* candidate = static_cast<BackendDescriptor*>(descriptor);
  return live_descriptors().contains(candidate) ? candidate : nullptr;
}

}  // namespace vgpusim_dnn

VGPUSIM_CUDNN_API cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                                             cudnnBackendDescriptor_t* descriptor) {
  if (descriptor == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (!vgpusim_dnn::is_supported_descriptor_type(type)) return CUDNN_STATUS_NOT_SUPPORTED;
  auto* created = new vgpusim_dnn::BackendDescriptor;
  created->type = type;
  vgpusim_dnn::live_descriptors().add(created);
  *descriptor = created;
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
  auto* existing = static_cast<vgpusim_dnn::BackendDescriptor*>(descriptor);
  if (!vgpusim_dnn::live_descriptors().remove(existing)) return CUDNN_STATUS_BAD_PARAM;
  delete existing;
  return CUDNN_STATUS_SUCCESS;
}
