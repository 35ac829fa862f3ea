// cudnnBackendFinalize: each descriptor type's required attributes and
// consistency checks, as cuDNN makes them (BAD_PARAM for what is missing or
// inconsistent, NOT_SUPPORTED for what the simulator does not run).
#include "api_export.h"
#include "backend_descriptor.h"
#include "conv_geometry.h"
#include "dnn_context.h"
#include "dnn_types.h"

namespace vgpusim_dnn {
namespace {

cudnnStatus_t finalize_tensor(const TensorAttributes& t) {
  if (!t.has_uid || !t.has_data_type || t.dims.empty() || t.strides.size() != t.dims.size()) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  if (t.byte_alignment <= 0) return CUDNN_STATUS_BAD_PARAM;
  for (std::size_t i = 0; i < t.dims.size(); ++i)
    if (t.dims[i] <= 0 || t.strides[i] <= 0) return CUDNN_STATUS_BAD_PARAM;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_convolution(const ConvolutionAttributes& c) {
  if (!c.has_comp_type || !c.has_mode || c.spatial_dims < 1) return CUDNN_STATUS_BAD_PARAM;
  const auto n = static_cast<std::size_t>(c.spatial_dims);
  if (c.dilations.size() != n || c.filter_strides.size() != n || c.pre_paddings.size() != n ||
      c.post_paddings.size() != n) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  return CUDNN_STATUS_SUCCESS;
}

TensorShape shape_of(const TensorAttributes& t) {
  TensorShape shape;
  shape.data_type = t.data_type;
  shape.nb_dims = static_cast<int>(t.dims.size());
  for (std::size_t i = 0; i < t.dims.size(); ++i) {
    shape.dims[i] = t.dims[i];
    shape.strides[i] = t.strides[i];
  }
  return shape;
}

ConvolutionShape shape_of(const ConvolutionAttributes& c) {
  ConvolutionShape shape;
  shape.spatial_dims = static_cast<int>(c.spatial_dims);
  for (std::size_t i = 0; i < static_cast<std::size_t>(c.spatial_dims); ++i) {
    shape.pre_padding[i] = c.pre_paddings[i];
    shape.post_padding[i] = c.post_paddings[i];
    shape.filter_stride[i] = c.filter_strides[i];
    shape.dilation[i] = c.dilations[i];
  }
  shape.mode = c.mode;
  shape.compute_type = c.comp_type;
  shape.groups = 0;  // implied by the tensors
  return shape;
}

cudnnStatus_t finalize_operation(OperationAttributes& op) {
  if (op.x == nullptr || op.w == nullptr || op.y == nullptr || op.convolution == nullptr) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  const TensorAttributes &x = op.x->tensor, &w = op.w->tensor, &y = op.y->tensor;
  if (x.uid == w.uid || x.uid == y.uid || w.uid == y.uid) return CUDNN_STATUS_BAD_PARAM;
  // Fusion through virtual tensors is not simulated: every operand is memory.
  if (x.is_virtual || w.is_virtual || y.is_virtual) return CUDNN_STATUS_NOT_SUPPORTED;
  return describe_convolution(shape_of(x), shape_of(w), shape_of(y), shape_of(op.convolution->convolution),
                              &op.problem);
}

cudnnStatus_t finalize_graph(const BackendDescriptor& d) {
  if (!is_live(d.handle) || d.ops.empty()) return CUDNN_STATUS_BAD_PARAM;
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

std::int64_t workspace_bytes_of(const BackendDescriptor&) {
  // Every plan here runs convolutions, and each wants the one algorithm's
  // workspace (the operations run one after another and share it).
  return static_cast<std::int64_t>(kConvWorkspaceBytes);
}

cudnnStatus_t finalize(BackendDescriptor& d) {
  switch (d.type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: return finalize_tensor(d.tensor);
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: return finalize_convolution(d.convolution);
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: return finalize_graph(d);
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
      if (d.graph == nullptr || !d.has_global_index) return CUDNN_STATUS_BAD_PARAM;
      // One engine: ENGINE_GLOBAL_COUNT is 1, so index 0 alone exists.
      return d.global_index == 0 ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
      return d.graph != nullptr && d.has_heur_mode ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
      return d.engine != nullptr ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
      return is_live(d.handle) && d.engine_config != nullptr ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
      return d.unique_ids.size() == d.data_pointers.size() ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
    default:
      if (is_convolution_operation(d.type)) return finalize_operation(d.operation);
      return CUDNN_STATUS_NOT_SUPPORTED;
  }
}

}  // namespace vgpusim_dnn

VGPUSIM_CUDNN_API cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
  vgpusim_dnn::BackendDescriptor* d = vgpusim_dnn::live_descriptor(descriptor);
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (d->finalized) return CUDNN_STATUS_BAD_PARAM;  // finalized once
  const cudnnStatus_t status = vgpusim_dnn::finalize(*d);
  if (status == CUDNN_STATUS_SUCCESS) d->finalized = true;
  return status;
}
