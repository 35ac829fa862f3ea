// cuDNN's graph (backend) API, which PyTorch and JAX use for convolutions
// through cudnn-frontend: an execution plan runs with a variant pack of
// pointers by tensor id. What the plan computes is read once per plan, by
// walking it as the library lets one (plan -> engine config -> engine ->
// operation graph -> its operation -> its tensors), and kept until the plan
// is destroyed; each execution then only maps the output's tensor id to its
// pointer. A plan of one convolution pass is tagged with that pass and its
// output claimed as in hooks_cudnn.cpp; anything else (fused graphs,
// anything the walk cannot read) runs as `other`, claiming nothing.
#include <cudnn.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "interpose/cudnn_support.h"
#include "interpose/library_call.h"
#include "interpose/tensor_operands.h"
#include "shim/runtime.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

// A tensor of a plan, by id.
struct PlanTensor {
  std::int64_t uid = 0;
  bool is_virtual = false;
  TensorOperand shape;  // address 0 until an execution names it
};

struct PlanFacts {
  LibraryOp op = LibraryOp::other;
  bool beta_zero = false;
  PlanTensor output;
  PlanTensor inputs[2];
};

// A descriptor of `type` made for one look-up and destroyed after it.
class Scratch {
 public:
  explicit Scratch(cudnnBackendDescriptorType_t type) {
    if (auto create = NEXT(cudnnBackendCreateDescriptor); create == nullptr || create(type, &desc_) != CUDNN_STATUS_SUCCESS) {
      desc_ = nullptr;
    }
  }
  ~Scratch() {
    if (desc_ == nullptr) return;
    if (auto destroy = NEXT_AS(cudnnBackendDestroyDescriptor, decltype(&cudnnBackendDestroyDescriptor))) destroy(desc_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  cudnnBackendDescriptor_t get() const { return desc_; }

 private:
  cudnnBackendDescriptor_t desc_ = nullptr;
};

bool get(cudnnBackendDescriptor_t desc, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
         std::int64_t count, std::int64_t* got, void* out) {
  auto get_attribute = NEXT(cudnnBackendGetAttribute);
  return desc != nullptr && get_attribute != nullptr &&
         get_attribute(desc, name, type, count, got, out) == CUDNN_STATUS_SUCCESS;
}

// `from`'s descriptor-valued attribute, read into `into` (made of the type
// the library expects there).
bool get_descriptor(cudnnBackendDescriptor_t from, cudnnBackendAttributeName_t name, const Scratch& into) {
  cudnnBackendDescriptor_t target = into.get();
  std::int64_t got = 0;
  return target != nullptr && get(from, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &target) && got == 1;
}

bool read_tensor(cudnnBackendDescriptor_t op, cudnnBackendAttributeName_t name, PlanTensor* out) {
  Scratch tensor(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  if (!get_descriptor(op, name, tensor)) return false;
  std::int64_t got = 0, rank = 0;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  bool is_virtual = false;
  std::int64_t dims[TensorOperand::kMaxRank] = {}, strides[TensorOperand::kMaxRank] = {};
  if (!get(tensor.get(), CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &got, &out->uid) ||
      !get(tensor.get(), CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &got, &type) ||
      !get(tensor.get(), CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, TensorOperand::kMaxRank, &rank, dims) ||
      !get(tensor.get(), CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, TensorOperand::kMaxRank, &got, strides) ||
      got != rank || rank > TensorOperand::kMaxRank) {
    return false;
  }
  if (get(tensor.get(), CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &got, &is_virtual)) out->is_virtual = is_virtual;
  out->shape.rank = static_cast<int>(rank);
  for (std::int64_t d = 0; d < rank; ++d) {
    out->shape.dims[static_cast<std::size_t>(d)] = dims[d];
    out->shape.strides[static_cast<std::size_t>(d)] = strides[d];
  }
  out->shape.element_bytes = cudnn_element_bytes(type);
  return true;
}

// Beta is a double or a float attribute, as the program set it.
bool read_beta_zero(cudnnBackendDescriptor_t op, cudnnBackendAttributeName_t name) {
  std::int64_t got = 0;
  double as_double = 1;
  if (get(op, name, CUDNN_TYPE_DOUBLE, 1, &got, &as_double)) return as_double == 0.0;
  float as_float = 1;
  return get(op, name, CUDNN_TYPE_FLOAT, 1, &got, &as_float) && as_float == 0.0f;
}

// The convolution pass an operation graph of one operation does.
struct Pass {
  cudnnBackendDescriptorType_t type;
  LibraryOp op;
  cudnnBackendAttributeName_t output, input_a, input_b, beta;
};
constexpr Pass kPasses[] = {
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, LibraryOp::conv_forward,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, LibraryOp::conv_backward_data,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, LibraryOp::conv_backward_filter,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
};

PlanFacts walk(cudnnBackendDescriptor_t plan) {
  PlanFacts facts;
  Scratch config(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR), engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR),
      graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  std::int64_t ops = 0;
  if (!get_descriptor(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config) ||
      !get_descriptor(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, engine) ||
      !get_descriptor(engine.get(), CUDNN_ATTR_ENGINE_OPERATION_GRAPH, graph) ||
      !get(graph.get(), CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &ops, nullptr) || ops != 1) {
    return facts;
  }
  // The array's element must be made of the operation's own type: each
  // pass's is tried in turn.
  for (const Pass& pass : kPasses) {
    Scratch op(pass.type);
    if (!get_descriptor(graph.get(), CUDNN_ATTR_OPERATIONGRAPH_OPS, op)) continue;
    PlanFacts read;
    if (read_tensor(op.get(), pass.output, &read.output) && read_tensor(op.get(), pass.input_a, &read.inputs[0]) &&
        read_tensor(op.get(), pass.input_b, &read.inputs[1])) {
      read.op = pass.op;
      read.beta_zero = read_beta_zero(op.get(), pass.beta);
      return read;
    }
    facts.op = pass.op;  // its pass is known, its tensors are not: nothing is claimed
    return facts;
  }
  return facts;
}

// Plans walked so far; a destroyed plan's entry goes with it.
struct PlanCache {
  std::mutex mutex;
  std::unordered_map<const void*, PlanFacts> facts;
};
PlanCache& plans() {
  static PlanCache* cache = new PlanCache;  // lives as long as the process: hooks run until exit
  return *cache;
}

PlanFacts facts_of(cudnnBackendDescriptor_t plan) {
  PlanCache& cache = plans();
  {
    std::lock_guard lock(cache.mutex);
    if (auto it = cache.facts.find(plan); it != cache.facts.end()) return it->second;
  }
  PlanFacts facts = walk(plan);  // outside the lock: it calls the library
  std::lock_guard lock(cache.mutex);
  cache.facts.emplace(plan, facts);
  return facts;
}

// The pointer the variant pack gives tensor `uid`; 0 if none.
std::uint64_t pointer_of(cudnnBackendDescriptor_t pack, std::int64_t uid) {
  constexpr std::int64_t kMax = 32;
  std::int64_t uids[kMax] = {}, count = 0, pointers_count = 0;
  void* pointers[kMax] = {};
  if (!get(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, kMax, &count, uids) ||
      !get(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, kMax, &pointers_count, pointers) ||
      count != pointers_count || count > kMax) {
    return 0;
  }
  for (std::int64_t i = 0; i < count; ++i) {
    if (uids[i] == uid) return reinterpret_cast<std::uint64_t>(pointers[i]);
  }
  return 0;
}

std::optional<ByteRange> plan_overwrites(const PlanFacts& facts, cudnnBackendDescriptor_t pack) {
  if (LibraryCall::inside_one() || facts.op == LibraryOp::other || !facts.beta_zero || facts.output.is_virtual) {
    return std::nullopt;
  }
  TensorOperand output = facts.output.shape, a = facts.inputs[0].shape, b = facts.inputs[1].shape;
  output.address = pointer_of(pack, facts.output.uid);
  a.address = pointer_of(pack, facts.inputs[0].uid);
  b.address = pointer_of(pack, facts.inputs[1].uid);
  if (a.address == 0 || b.address == 0) return std::nullopt;  // an input the check cannot see
  return overwritten_whole(output, false, {a, b});
}

}  // namespace

VGPUMEM_LIBRARY_HOOK cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
                                                       cudnnBackendDescriptor_t variantPack) {
  count_library_call(LIBRARY_HOOK(cudnnBackendExecute));
  auto next = NEXT(cudnnBackendExecute);
  if (next == nullptr) return CUDNN_STATUS_NOT_INITIALIZED;
  if (passes_through() || LibraryCall::inside_one()) return next(handle, executionPlan, variantPack);
  const PlanFacts facts = facts_of(executionPlan);
  LibraryCall call(facts.op, plan_overwrites(facts, variantPack), cudnn_stream(handle));
  return call.returned(next(handle, executionPlan, variantPack));
}

// A plan destroyed may be reallocated at the same address for another:
// what was read of it goes first.
VGPUMEM_LIBRARY_HOOK cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
  count_library_call(LIBRARY_HOOK(cudnnBackendDestroyDescriptor));
  auto next = NEXT(cudnnBackendDestroyDescriptor);
  if (next == nullptr) return CUDNN_STATUS_NOT_INITIALIZED;
  if (!passes_through()) {
    PlanCache& cache = plans();
    std::lock_guard lock(cache.mutex);
    cache.facts.erase(descriptor);
  }
  return next(descriptor);
}
