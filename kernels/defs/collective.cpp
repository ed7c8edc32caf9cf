// Collectives between the members of a group of devices, in one process or across a cluster
// (comm/collective_executor.h runs them):
//
//   CollectiveAllReduce(x_1..x_N) -> (y_1..y_N)   y_i = sum (or mean) over members of x_i; one
//                                                 collective for all N inputs (a gradient bucket)
//   CollectiveBroadcast(x?) -> y                  the root member's x on every member; the others
//                                                 have no input and say their output's dtype, shape
//   CollectiveAllGather(x) -> y                   members' x concatenated along dim 0, member order
//
// Common attributes: group_key (Int), group_members (String: the members' full device names in
// member order, joined by ','; attributes have no string lists), member (Int: this node's index),
// instance_key (Int, below group_instances: unique per collective node of the group in a step) and
// group_instances (Int: how many instances of the group every step runs; the order MPI needs,
// comm/collective_order.h), and optionally nccl_id (String: NCCL's unique id, 256 hex digits,
// comm/nccl/nccl_id.h): the group runs through NCCL on its GPU members (kernels/cuda/
// collective.cpp; one GPU member per process); refused in a build without CUDA. AllReduce adds reduction ("sum" or "mean"), Broadcast root (Int) and,
// for non-root members, dtype (Type) and shape (Shape).
//
// Flags: stateful and with a side effect (every member must take part: never merged by CSE, folded
// or pruned as dead) kept in no program order with other side effects (a chain through the members
// of a group would deadlock them: each waits for the others), and NOT differentiable (a gradient of a collective is another collective
// the training code places itself). The kernels set their outputs themselves (kSetsOutputs): an
// all-reduce of one input needs no copy, an all-gather's dim 0 is known only at run time.
#include "runtime/collectives.h"
#include "kernels/collective_attrs.h"
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft {

CollectiveParams collective_params(CollectiveKind kind, const std::string& display, const Attrs& attrs,
                                   int num_inputs) {
  const std::string where = "[" + display + "] ";
  CollectiveParams p;
  p.kind = kind;
  p.op = display;
  p.group_key = attrs.get<int64_t>("group_key");
  p.members = parse_group_members(attrs.get<std::string>("group_members"), display);
  const int64_t member = attrs.get<int64_t>("member");
  const auto n = static_cast<int64_t>(p.members.size());
  if (member < 0 || member >= n)
    throw InvalidArgument(where + "member " + std::to_string(member) + " is not an index of the group's " +
                          std::to_string(n) + " members");
  p.member = static_cast<int>(member);
  p.group_instances = attrs.get<int64_t>("group_instances");
  p.instance_key = attrs.get<int64_t>("instance_key");
  if (p.group_instances < 1)
    throw InvalidArgument(where + "group_instances must be at least 1, got " + std::to_string(p.group_instances));
  if (p.instance_key < 0 || p.instance_key >= p.group_instances)
    throw InvalidArgument(where + "instance_key " + std::to_string(p.instance_key) + " must be in 0.." +
                          std::to_string(p.group_instances - 1) + " (group_instances " +
                          std::to_string(p.group_instances) + ")");
  for (const std::string& m : p.members) (void)task_of_device(m, display);
  if (attrs.find("nccl_id")) {
    const std::string* id = &attrs.get<std::string>("nccl_id");
    if (!nccl_compiled_in())
      throw InvalidArgument(where + "has an nccl_id, but weft was built without CUDA (so without NCCL): build the "
                                    "graph without it (DataParallel adds one only when it can run)");
    (void)decode_nccl_id(*id, display);  // exact length, hex digits
    p.nccl_id = *id;
  }
  switch (kind) {
    case CollectiveKind::kAllReduce: {
      const std::string& r = attrs.get<std::string>("reduction");
      if (r == "sum") p.reduction = CollectiveReduction::kSum;
      else if (r == "mean") p.reduction = CollectiveReduction::kMean;
      else throw InvalidArgument(where + "reduction must be \"sum\" or \"mean\", got \"" + r + "\"");
      if (num_inputs < 1) throw InvalidArgument(where + "needs at least one input");
      break;
    }
    case CollectiveKind::kBroadcast: {
      const int64_t root = attrs.get<int64_t>("root");
      if (root < 0 || root >= n)
        throw InvalidArgument(where + "root " + std::to_string(root) + " is not an index of the group's " +
                              std::to_string(n) + " members");
      p.root = static_cast<int>(root);
      if (p.root == p.member) {
        if (num_inputs != 1) throw InvalidArgument(where + "the root member needs exactly 1 input, got " + std::to_string(num_inputs));
      } else {
        if (num_inputs != 0)
          throw InvalidArgument(where + "member " + std::to_string(member) + " is not the root (" + std::to_string(root) +
                                ") and takes no input, got " + std::to_string(num_inputs));
        p.dtype = attrs.get<DType>("dtype");
        p.shape = attrs.get<Shape>("shape");
        for (int64_t d : p.shape)
          if (d < 0) throw InvalidArgument(where + "shape " + p.shape.to_string() + " must be fully known");
      }
      break;
    }
    case CollectiveKind::kAllGather:
      if (num_inputs != 1) throw InvalidArgument(where + "needs exactly 1 input");
      break;
  }
  return p;
}

namespace defs {

namespace {

// The host collectives (MPI) take four dtypes; through NCCL (a node with nccl_id) every dtype NCCL has.
bool collective_dtype(DType d, bool nccl) {
  if (nccl) return nccl_dtype_supported(d);
  return d == DType::Float32 || d == DType::Float64 || d == DType::Int32 || d == DType::Int64;
}

void check_dtype(InferContext& ctx, DType d, const CollectiveParams& p) {
  const bool nccl = !p.nccl_id.empty();
  if (!collective_dtype(d, nccl))
    ctx.fail(nccl ? "through NCCL takes every dtype but bool, got " + std::string(dtype_name(d))
                  : "takes float32, float64, int32 or int64, got " + std::string(dtype_name(d)) +
                        " (float16, bfloat16, int8 and uint8 run through NCCL, on GPUs)");
}

CollectiveParams params_or_fail(InferContext& ctx, CollectiveKind kind) {
  try {
    return collective_params(kind, ctx.op().display, ctx.attrs(), ctx.num_inputs());
  } catch (const InvalidArgument&) {
    throw;  // already "[display] ..."
  } catch (const Error& e) {
    ctx.fail(e.what());
  }
}

void infer_all_reduce(InferContext& ctx) {
  const CollectiveParams p = params_or_fail(ctx, CollectiveKind::kAllReduce);
  const DType d = ctx.input_dtype(0);
  check_dtype(ctx, d, p);
  ctx.set_num_outputs(ctx.num_inputs());
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.input_dtype(i) != d)
      ctx.fail("inputs must share one dtype: input 0 is " + std::string(dtype_name(d)) + ", input " + std::to_string(i) +
               " " + std::string(dtype_name(ctx.input_dtype(i))));
    ctx.set_output(i, d, ctx.input_shape(i));
  }
}

void infer_broadcast(InferContext& ctx) {
  const CollectiveParams p = params_or_fail(ctx, CollectiveKind::kBroadcast);
  if (p.member == p.root) {
    check_dtype(ctx, ctx.input_dtype(0), p);
    ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  } else {
    check_dtype(ctx, p.dtype, p);
    ctx.set_output(0, p.dtype, p.shape);
  }
}

void infer_all_gather(InferContext& ctx) {
  const CollectiveParams p = params_or_fail(ctx, CollectiveKind::kAllGather);
  check_dtype(ctx, ctx.input_dtype(0), p);
  const Shape& in = ctx.input_shape(0);
  if (in.rank() < 1) ctx.fail("needs an input of rank >= 1, got shape " + in.to_string());
  std::vector<int64_t> dims = in.to_vector();
  if (p.members.size() > 1) dims[0] = -1;  // the members' dim 0 may differ
  ctx.set_output(0, ctx.input_dtype(0), Shape(dims));
}

// The cost is moving bytes, priced by placement's link model; the arithmetic is negligible.
Cost collective_cost(const InferContext&) { return {}; }

}  // namespace

void register_collective_defs() {
  const std::vector<AttrSpec> group = {{"group_key", AttrType::Int},
                                       {"group_members", AttrType::String},
                                       {"member", AttrType::Int},
                                       {"instance_key", AttrType::Int},
                                       {"group_instances", AttrType::Int},
                                       {"nccl_id", AttrType::String, /*required=*/false}};
  constexpr uint32_t flags = kStateful | kSideEffect | kUnorderedSideEffect | kNotDifferentiable | kSetsOutputs;
  auto with = [&](std::vector<AttrSpec> more) {
    std::vector<AttrSpec> all = group;
    all.insert(all.end(), more.begin(), more.end());
    return all;
  };
  op_registry().add({.name = "CollectiveAllReduce", .display = "collective_all_reduce", .min_inputs = 1,
                     .max_inputs = -1, .num_outputs = -1, .attrs = with({{"reduction", AttrType::String}}),
                     .infer = infer_all_reduce, .cost = collective_cost,
                     // Differentiable: the gradient of a sum over replicas is the sum of the
                     // gradients (registered by api/distribute/replica_context.cpp).
                     .flags = flags & ~kNotDifferentiable});
  op_registry().add({.name = "CollectiveBroadcast", .display = "collective_broadcast", .min_inputs = 0,
                     .max_inputs = 1,
                     .attrs = with({{"root", AttrType::Int},
                                    {"dtype", AttrType::Type, /*required=*/false},
                                    {"shape", AttrType::Shape, /*required=*/false}}),
                     .infer = infer_broadcast, .cost = collective_cost, .flags = flags, .kernel_dtype_input = -1});
  op_registry().add({.name = "CollectiveAllGather", .display = "collective_all_gather", .min_inputs = 1,
                     .max_inputs = 1, .attrs = group, .infer = infer_all_gather, .cost = collective_cost,
                     .flags = flags});
}

}  // namespace defs
}  // namespace weft
