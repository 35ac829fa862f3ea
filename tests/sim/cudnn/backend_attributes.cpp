// cudnnBackendSetAttribute and cudnnBackendGetAttribute for the supported
// descriptor types. Every attribute that can be set reads back; an attribute
// this simulator does not implement is CUDNN_STATUS_NOT_SUPPORTED, a wrong
// attribute type or element count CUDNN_STATUS_BAD_PARAM.
#include <cstring>

#include "api_export.h"
#include "backend_descriptor.h"

namespace vgpusim_dnn {
namespace {

constexpr std::int64_t kMaxSpatial = 6;

// ---- setting ----

struct SetRequest {
  cudnnBackendAttributeType_t type;
  std::int64_t count;
  const void* elements;
};

template <class T>
cudnnStatus_t take(const SetRequest& r, cudnnBackendAttributeType_t wanted, std::int64_t min, std::int64_t max,
                   std::vector<T>& out) {
  if (r.type != wanted || r.count < min || r.count > max) return CUDNN_STATUS_BAD_PARAM;
  if (r.count > 0 && r.elements == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  const T* values = static_cast<const T*>(r.elements);
  out.assign(values, values + r.count);
  return CUDNN_STATUS_SUCCESS;
}

template <class T>
cudnnStatus_t take_one(const SetRequest& r, cudnnBackendAttributeType_t wanted, T& out) {
  if (r.type != wanted || r.count != 1) return CUDNN_STATUS_BAD_PARAM;
  if (r.elements == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  std::memcpy(&out, r.elements, sizeof out);
  return CUDNN_STATUS_SUCCESS;
}

// Scaling factors may be given as float or double; kept as given.
cudnnStatus_t take_scale(const SetRequest& r, double& value, cudnnBackendAttributeType_t& type) {
  if (r.count != 1) return CUDNN_STATUS_BAD_PARAM;
  if (r.elements == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (r.type == CUDNN_TYPE_FLOAT) {
    float f;
    std::memcpy(&f, r.elements, sizeof f);
    value = f;
  } else if (r.type == CUDNN_TYPE_DOUBLE) {
    std::memcpy(&value, r.elements, sizeof value);
  } else {
    return CUDNN_STATUS_BAD_PARAM;
  }
  type = r.type;
  return CUDNN_STATUS_SUCCESS;
}

// Descriptors given as an attribute: live, finalized, of an accepted type;
// kept as snapshots.
template <class Accepts>
cudnnStatus_t take_descriptors(const SetRequest& r, std::int64_t min, std::int64_t max, Accepts accepts,
                               std::vector<DescriptorSnapshot>& out) {
  std::vector<cudnnBackendDescriptor_t> given;
  if (const cudnnStatus_t status = take(r, CUDNN_TYPE_BACKEND_DESCRIPTOR, min, max, given);
      status != CUDNN_STATUS_SUCCESS) {
    return status;
  }
  std::vector<DescriptorSnapshot> snapshots;
  for (cudnnBackendDescriptor_t handle : given) {
    const BackendDescriptor* d = live_descriptor(handle);
    if (d == nullptr || !accepts(d->type)) return CUDNN_STATUS_BAD_PARAM;
    if (!d->finalized) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
    snapshots.push_back(std::make_shared<const BackendDescriptor>(*d));
  }
  out = std::move(snapshots);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t take_descriptor(const SetRequest& r, cudnnBackendDescriptorType_t wanted, DescriptorSnapshot& out) {
  std::vector<DescriptorSnapshot> one;
  const cudnnStatus_t status =
      take_descriptors(r, 1, 1, [wanted](cudnnBackendDescriptorType_t t) { return t == wanted; }, one);
  if (status == CUDNN_STATUS_SUCCESS) out = one[0];
  return status;
}

// Records that an attribute was set, when it was.
cudnnStatus_t mark(cudnnStatus_t status, bool& was_set) {
  if (status == CUDNN_STATUS_SUCCESS) was_set = true;
  return status;
}

// Which role an operation attribute names, for the three convolutions.
enum class Role { kNone, kAlpha, kBeta, kConvolution, kX, kW, kY };

Role operation_role(cudnnBackendDescriptorType_t type, cudnnBackendAttributeName_t name) {
  switch (type) {
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
      switch (name) {
        case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA: return Role::kAlpha;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA: return Role::kBeta;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC: return Role::kConvolution;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X: return Role::kX;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W: return Role::kW;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y: return Role::kY;
        default: return Role::kNone;
      }
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
      switch (name) {
        case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA: return Role::kAlpha;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA: return Role::kBeta;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC: return Role::kConvolution;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX: return Role::kX;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W: return Role::kW;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY: return Role::kY;
        default: return Role::kNone;
      }
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
      switch (name) {
        case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA: return Role::kAlpha;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA: return Role::kBeta;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC: return Role::kConvolution;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X: return Role::kX;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW: return Role::kW;
        case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY: return Role::kY;
        default: return Role::kNone;
      }
    default:
      return Role::kNone;
  }
}

DescriptorSnapshot* operation_tensor(OperationAttributes& op, Role role) {
  return role == Role::kX ? &op.x : role == Role::kW ? &op.w : role == Role::kY ? &op.y : nullptr;
}

cudnnStatus_t set_attribute(BackendDescriptor& d, cudnnBackendAttributeName_t name, const SetRequest& r) {
  switch (d.type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
      TensorAttributes& t = d.tensor;
      switch (name) {
        case CUDNN_ATTR_TENSOR_UNIQUE_ID: return mark(take_one(r, CUDNN_TYPE_INT64, t.uid), t.has_uid);
        case CUDNN_ATTR_TENSOR_DATA_TYPE: return mark(take_one(r, CUDNN_TYPE_DATA_TYPE, t.data_type), t.has_data_type);
        case CUDNN_ATTR_TENSOR_DIMENSIONS: return take(r, CUDNN_TYPE_INT64, 1, 8, t.dims);
        case CUDNN_ATTR_TENSOR_STRIDES: return take(r, CUDNN_TYPE_INT64, 1, 8, t.strides);
        case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT: return take_one(r, CUDNN_TYPE_INT64, t.byte_alignment);
        case CUDNN_ATTR_TENSOR_IS_VIRTUAL: return take_one(r, CUDNN_TYPE_BOOLEAN, t.is_virtual);
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    }
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: {
      ConvolutionAttributes& c = d.convolution;
      switch (name) {
        case CUDNN_ATTR_CONVOLUTION_COMP_TYPE: return mark(take_one(r, CUDNN_TYPE_DATA_TYPE, c.comp_type), c.has_comp_type);
        case CUDNN_ATTR_CONVOLUTION_CONV_MODE: return mark(take_one(r, CUDNN_TYPE_CONVOLUTION_MODE, c.mode), c.has_mode);
        case CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS: return take_one(r, CUDNN_TYPE_INT64, c.spatial_dims);
        case CUDNN_ATTR_CONVOLUTION_DILATIONS: return take(r, CUDNN_TYPE_INT64, 1, kMaxSpatial, c.dilations);
        case CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES: return take(r, CUDNN_TYPE_INT64, 1, kMaxSpatial, c.filter_strides);
        case CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS: return take(r, CUDNN_TYPE_INT64, 1, kMaxSpatial, c.pre_paddings);
        case CUDNN_ATTR_CONVOLUTION_POST_PADDINGS: return take(r, CUDNN_TYPE_INT64, 1, kMaxSpatial, c.post_paddings);
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    }
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
      switch (name) {
        case CUDNN_ATTR_OPERATIONGRAPH_HANDLE: return take_one(r, CUDNN_TYPE_HANDLE, d.handle);
        case CUDNN_ATTR_OPERATIONGRAPH_OPS:
          return take_descriptors(r, 1, 64, is_convolution_operation, d.ops);
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
      switch (name) {
        case CUDNN_ATTR_ENGINE_OPERATION_GRAPH:
          return take_descriptor(r, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, d.graph);
        case CUDNN_ATTR_ENGINE_GLOBAL_INDEX: return mark(take_one(r, CUDNN_TYPE_INT64, d.global_index), d.has_global_index);
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
      switch (name) {
        case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH:
          return take_descriptor(r, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, d.graph);
        case CUDNN_ATTR_ENGINEHEUR_MODE: {
          cudnnBackendHeurMode_t mode{};
          if (const cudnnStatus_t status = take_one(r, CUDNN_TYPE_HEUR_MODE, mode); status != CUDNN_STATUS_SUCCESS) {
            return status;
          }
          if (mode < CUDNN_HEUR_MODE_INSTANT || mode >= CUDNN_HEUR_MODES_COUNT) return CUDNN_STATUS_BAD_PARAM;
          d.heur_mode = mode;
          d.has_heur_mode = true;
          return CUDNN_STATUS_SUCCESS;
        }
        case CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET: return take_one(r, CUDNN_TYPE_INT32, d.sm_count_target);
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
      if (name == CUDNN_ATTR_ENGINECFG_ENGINE) return take_descriptor(r, CUDNN_BACKEND_ENGINE_DESCRIPTOR, d.engine);
      return CUDNN_STATUS_NOT_SUPPORTED;  // knob choices included: the one engine has no knobs
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
      switch (name) {
        case CUDNN_ATTR_EXECUTION_PLAN_HANDLE: return take_one(r, CUDNN_TYPE_HANDLE, d.handle);
        case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG:
          return take_descriptor(r, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, d.engine_config);
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
      switch (name) {
        case CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: return take(r, CUDNN_TYPE_INT64, 0, 1 << 20, d.unique_ids);
        case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: return take(r, CUDNN_TYPE_VOID_PTR, 0, 1 << 20, d.data_pointers);
        case CUDNN_ATTR_VARIANT_PACK_WORKSPACE: return take_one(r, CUDNN_TYPE_VOID_PTR, d.workspace);
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    default:
      break;
  }
  if (is_convolution_operation(d.type)) {
    OperationAttributes& op = d.operation;
    const Role role = operation_role(d.type, name);
    switch (role) {
      case Role::kNone: return CUDNN_STATUS_NOT_SUPPORTED;
      case Role::kAlpha: return take_scale(r, op.alpha, op.alpha_type);
      case Role::kBeta: return take_scale(r, op.beta, op.beta_type);
      case Role::kConvolution: return take_descriptor(r, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, op.convolution);
      default: return take_descriptor(r, CUDNN_BACKEND_TENSOR_DESCRIPTOR, *operation_tensor(op, role));
    }
  }
  return CUDNN_STATUS_NOT_SUPPORTED;
}

// ---- getting ----

struct GetRequest {
  cudnnBackendAttributeType_t type;
  std::int64_t requested;
  std::int64_t* count;
  void* elements;
};

// *count is the number of elements the attribute holds; min(requested, that)
// are copied.
template <class T>
cudnnStatus_t give(const GetRequest& r, cudnnBackendAttributeType_t type, const T* values, std::int64_t available) {
  if (r.type != type) return CUDNN_STATUS_BAD_PARAM;
  *r.count = available;
  const std::int64_t copied = r.requested < available ? r.requested : available;
  if (copied > 0) std::memcpy(r.elements, values, static_cast<std::size_t>(copied) * sizeof(T));
  return CUDNN_STATUS_SUCCESS;
}
template <class T>
cudnnStatus_t give(const GetRequest& r, cudnnBackendAttributeType_t type, const std::vector<T>& values) {
  return give(r, type, values.data(), static_cast<std::int64_t>(values.size()));
}
template <class T>
cudnnStatus_t give_one(const GetRequest& r, cudnnBackendAttributeType_t type, T value) {
  return give(r, type, &value, 1);
}

cudnnStatus_t give_scale(const GetRequest& r, double value) {
  if (r.type == CUDNN_TYPE_FLOAT) return give_one(r, CUDNN_TYPE_FLOAT, static_cast<float>(value));
  return give_one(r, CUDNN_TYPE_DOUBLE, value);
}

// Copies snapshots into descriptors the caller created, of the same types.
cudnnStatus_t give_descriptors(const GetRequest& r, const std::vector<DescriptorSnapshot>& snapshots) {
  if (r.type != CUDNN_TYPE_BACKEND_DESCRIPTOR) return CUDNN_STATUS_BAD_PARAM;
  const auto available = static_cast<std::int64_t>(snapshots.size());
  const std::int64_t copied = r.requested < available ? r.requested : available;
  auto* targets = static_cast<cudnnBackendDescriptor_t*>(r.elements);
  for (std::int64_t i = 0; i < copied; ++i) {
    BackendDescriptor* target = live_descriptor(targets[i]);
    if (target == nullptr || target->type != snapshots[static_cast<std::size_t>(i)]->type) return CUDNN_STATUS_BAD_PARAM;
  }
  for (std::int64_t i = 0; i < copied; ++i) *live_descriptor(targets[i]) = *snapshots[static_cast<std::size_t>(i)];
  *r.count = available;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t give_descriptor(const GetRequest& r, const DescriptorSnapshot& snapshot) {
  if (snapshot == nullptr) return give_descriptors(r, {});
  return give_descriptors(r, {snapshot});
}

cudnnStatus_t get_attribute(const BackendDescriptor& d, cudnnBackendAttributeName_t name, const GetRequest& r) {
  switch (d.type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
      const TensorAttributes& t = d.tensor;
      switch (name) {
        case CUDNN_ATTR_TENSOR_UNIQUE_ID: return give_one(r, CUDNN_TYPE_INT64, t.uid);
        case CUDNN_ATTR_TENSOR_DATA_TYPE: return give_one(r, CUDNN_TYPE_DATA_TYPE, t.data_type);
        case CUDNN_ATTR_TENSOR_DIMENSIONS: return give(r, CUDNN_TYPE_INT64, t.dims);
        case CUDNN_ATTR_TENSOR_STRIDES: return give(r, CUDNN_TYPE_INT64, t.strides);
        case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT: return give_one(r, CUDNN_TYPE_INT64, t.byte_alignment);
        case CUDNN_ATTR_TENSOR_IS_VIRTUAL: return give_one(r, CUDNN_TYPE_BOOLEAN, t.is_virtual);
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    }
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: {
      const ConvolutionAttributes& c = d.convolution;
      switch (name) {
        case CUDNN_ATTR_CONVOLUTION_COMP_TYPE: return give_one(r, CUDNN_TYPE_DATA_TYPE, c.comp_type);
        case CUDNN_ATTR_CONVOLUTION_CONV_MODE: return give_one(r, CUDNN_TYPE_CONVOLUTION_MODE, c.mode);
        case CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS: return give_one(r, CUDNN_TYPE_INT64, c.spatial_dims);
        case CUDNN_ATTR_CONVOLUTION_DILATIONS: return give(r, CUDNN_TYPE_INT64, c.dilations);
        case CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES: return give(r, CUDNN_TYPE_INT64, c.filter_strides);
        case CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS: return give(r, CUDNN_TYPE_INT64, c.pre_paddings);
        case CUDNN_ATTR_CONVOLUTION_POST_PADDINGS: return give(r, CUDNN_TYPE_INT64, c.post_paddings);
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    }
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
      switch (name) {
        case CUDNN_ATTR_OPERATIONGRAPH_HANDLE: return give_one(r, CUDNN_TYPE_HANDLE, d.handle);
        case CUDNN_ATTR_OPERATIONGRAPH_OPS: return give_descriptors(r, d.ops);
        case CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT: return give_one(r, CUDNN_TYPE_INT64, std::int64_t{1});
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
      switch (name) {
        case CUDNN_ATTR_ENGINE_OPERATION_GRAPH: return give_descriptor(r, d.graph);
        case CUDNN_ATTR_ENGINE_GLOBAL_INDEX: return give_one(r, CUDNN_TYPE_INT64, d.global_index);
        // The one engine is deterministic, needs no particular layout and
        // has no knobs: every note and knob list is empty.
        case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE:
          return give(r, CUDNN_TYPE_NUMERICAL_NOTE, std::vector<cudnnBackendNumericalNote_t>{});
        case CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE:
          return give(r, CUDNN_TYPE_BEHAVIOR_NOTE, std::vector<cudnnBackendBehaviorNote_t>{});
        case CUDNN_ATTR_ENGINE_KNOB_INFO: return give_descriptors(r, {});
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
      switch (name) {
        case CUDNN_ATTR_ENGINECFG_ENGINE: return give_descriptor(r, d.engine);
        case CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE: return give_one(r, CUDNN_TYPE_INT64, workspace_bytes_of(d));
        case CUDNN_ATTR_ENGINECFG_KNOB_CHOICES: return give_descriptors(r, {});
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
      switch (name) {
        case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: return give_descriptor(r, d.graph);
        case CUDNN_ATTR_ENGINEHEUR_MODE: return give_one(r, CUDNN_TYPE_HEUR_MODE, d.heur_mode);
        case CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET: return give_one(r, CUDNN_TYPE_INT32, d.sm_count_target);
        case CUDNN_ATTR_ENGINEHEUR_RESULTS: return give_descriptor(r, heuristic_result(d));
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
      switch (name) {
        case CUDNN_ATTR_EXECUTION_PLAN_HANDLE: return give_one(r, CUDNN_TYPE_HANDLE, d.handle);
        case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: return give_descriptor(r, d.engine_config);
        case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE:
          return give_one(r, CUDNN_TYPE_INT64, workspace_bytes_of(*d.engine_config));
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
      switch (name) {
        case CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: return give(r, CUDNN_TYPE_INT64, d.unique_ids);
        case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: return give(r, CUDNN_TYPE_VOID_PTR, d.data_pointers);
        case CUDNN_ATTR_VARIANT_PACK_WORKSPACE: return give_one(r, CUDNN_TYPE_VOID_PTR, d.workspace);
        default: return CUDNN_STATUS_NOT_SUPPORTED;
      }
    default:
      break;
  }
  if (is_convolution_operation(d.type)) {
    const OperationAttributes& op = d.operation;
    switch (operation_role(d.type, name)) {
      case Role::kNone: return CUDNN_STATUS_NOT_SUPPORTED;
      case Role::kAlpha: return give_scale(r, op.alpha);
      case Role::kBeta: return give_scale(r, op.beta);
      case Role::kConvolution: return give_descriptor(r, op.convolution);
      case Role::kX: return give_descriptor(r, op.x);
      case Role::kW: return give_descriptor(r, op.w);
      case Role::kY: return give_descriptor(r, op.y);
    }
  }
  return CUDNN_STATUS_NOT_SUPPORTED;
}

}  // namespace
}  // namespace vgpusim_dnn

VGPUSIM_CUDNN_API cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                                         cudnnBackendAttributeName_t name,
                                                         cudnnBackendAttributeType_t type, int64_t count,
                                                         const void* elements) {
  vgpusim_dnn::BackendDescriptor* d = vgpusim_dnn::live_descriptor(descriptor);
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM;
  // A finalized descriptor is immutable (cuDNN answers NOT_INITIALIZED).
  if (d->finalized) return CUDNN_STATUS_NOT_INITIALIZED;
  return vgpusim_dnn::set_attribute(*d, name, {type, count, elements});
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                                         cudnnBackendAttributeName_t name,
                                                         cudnnBackendAttributeType_t type, int64_t requested,
                                                         int64_t* count, void* elements) {
  const vgpusim_dnn::BackendDescriptor* d = vgpusim_dnn::live_descriptor(descriptor);
  if (d == nullptr || count == nullptr || requested < 0) return CUDNN_STATUS_BAD_PARAM;
  if (requested > 0 && elements == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (!d->finalized) return CUDNN_STATUS_NOT_INITIALIZED;  // cuDNN reads finalized descriptors only
  return vgpusim_dnn::get_attribute(*d, name, {type, requested, count, elements});
}
