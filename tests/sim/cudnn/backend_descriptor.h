// What a backend (graph API) descriptor holds. One struct serves every
// supported descriptor type; the fields of other types stay empty.
//
// A descriptor set as another's attribute (a tensor on an operation, an
// operation on a graph, ...) is kept as a snapshot taken at SetAttribute
// time, as cuDNN copies it: the caller may destroy its own descriptor after.
// GetAttribute of such an attribute copies the snapshot into descriptors the
// caller created (of the same type), as cuDNN fills them.
#pragma once

#include <cudnn_graph.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "conv_operation.h"

namespace vgpusim_dnn {

struct BackendDescriptor;
using DescriptorSnapshot = std::shared_ptr<const BackendDescriptor>;

struct TensorAttributes {
  bool has_uid = false, has_data_type = false;
  std::int64_t uid = 0;
  cudnnDataType_t data_type = CUDNN_DATA_FLOAT;
  std::vector<std::int64_t> dims, strides;
  std::int64_t byte_alignment = 0;
  bool is_virtual = false;
};

struct ConvolutionAttributes {
  bool has_comp_type = false, has_mode = false;
  cudnnDataType_t comp_type = CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  std::int64_t spatial_dims = 0;
  std::vector<std::int64_t> dilations, filter_strides, pre_paddings, post_paddings;
};

// The three convolution operations: x, w, y are the forward roles (DX, W, DY
// for backward data; X, DW, DY for backward filter).
struct OperationAttributes {
  DescriptorSnapshot x, w, y, convolution;
  double alpha = 1.0, beta = 0.0;
  cudnnBackendAttributeType_t alpha_type = CUDNN_TYPE_FLOAT, beta_type = CUDNN_TYPE_FLOAT;
  ConvOperation problem;  // set by Finalize: everything but the pointers
};

struct BackendDescriptor {
  cudnnBackendDescriptorType_t type = CUDNN_BACKEND_TENSOR_DESCRIPTOR;
  bool finalized = false;

  TensorAttributes tensor;
  ConvolutionAttributes convolution;
  OperationAttributes operation;
  cudnnHandle_t handle = nullptr;           // OPERATIONGRAPH, EXECUTION_PLAN
  std::vector<DescriptorSnapshot> ops;      // OPERATIONGRAPH
  DescriptorSnapshot graph;                 // ENGINE, ENGINEHEUR
  bool has_heur_mode = false;               // ENGINEHEUR
  cudnnBackendHeurMode_t heur_mode = CUDNN_HEUR_MODE_INSTANT;
  std::int32_t sm_count_target = 0;
  bool has_global_index = false;            // ENGINE
  std::int64_t global_index = 0;
  DescriptorSnapshot engine;                // ENGINECFG
  DescriptorSnapshot engine_config;         // EXECUTION_PLAN
  std::vector<std::int64_t> unique_ids;     // VARIANT_PACK
  std::vector<void*> data_pointers;
  void* workspace = nullptr;
};

// The descriptor types this simulator implements.
bool is_supported_descriptor_type(cudnnBackendDescriptorType_t type);
inline bool is_convolution_operation(cudnnBackendDescriptorType_t type) {
  return type == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR ||
         type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR ||
         type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
}
ConvKind convolution_kind(cudnnBackendDescriptorType_t type);

// The descriptor a cudnnBackendDescriptor_t stands for, or nullptr when it is
// not one this library created and has not destroyed.
BackendDescriptor* live_descriptor(cudnnBackendDescriptor_t descriptor);

// Finalize: checks as cuDNN does and computes what later calls read.
cudnnStatus_t finalize(BackendDescriptor& descriptor);

// What an ENGINEHEUR descriptor's RESULTS hold: one finalized engine config,
// engine 0 of the descriptor's graph (the one engine, whatever the mode).
DescriptorSnapshot heuristic_result(const BackendDescriptor& heuristics);

// Workspace a finalized plan or engine config needs.
std::int64_t workspace_bytes_of(const BackendDescriptor& engine_config);

}  // namespace vgpusim_dnn
