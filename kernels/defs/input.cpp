// Definition of ReadShardedBatch: each data-parallel replica reads its own rows of each global
// training batch from files on its own task (state and order: runtime/sharded_input.h; the split:
// runtime/shard_split.h; attributes: kernels/defs/input.h).
//
// Outputs: features float32 (n_r, ...example_shape), labels int32 (n_r,), and weight, a float32
// scalar n_r / N_step, the replica's share of the step's global batch (for averaging a loss over
// replicas whose shares differ). n_r is static only with drop_remainder (every batch is full);
// otherwise the last batch of an epoch is shorter and n_r is unknown (-1) until run time.
#include <cmath>

#include "kernels/defs/input.h"
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"
#include "runtime/shard_split.h"

namespace weft::defs {

namespace {

void infer_read_sharded_batch(InferContext& ctx) {
  const Attrs& a = ctx.attrs();
  const ShardedInputSpec spec = sharded_input_spec(a);
  spec.validate(ctx.op().display);  // InvalidArgument("[read_sharded_batch] ...")
  const int64_t replica = a.get<int64_t>("replica");
  if (replica < 0 || replica >= spec.num_replicas)
    ctx.fail("replica " + std::to_string(replica) + " is out of range for " + std::to_string(spec.num_replicas) +
             " replicas");
  if (a.get<std::string>("source").empty()) ctx.fail("needs a non-empty source name");
  if (a.get_or<int64_t>("start_batch", 0) < 0)
    ctx.fail("start_batch must be >= 0, got " + std::to_string(a.get<int64_t>("start_batch")));
  const double scale = a.get<double>("scale");
  if (!std::isfinite(scale)) ctx.fail("scale must be finite, got " + std::to_string(scale));
  if (const AttrValue* d = a.find("features_dtype"); d && std::get<DType>(*d) != DType::Float32)
    ctx.fail("features_dtype must be float32, got " + std::string(dtype_name(std::get<DType>(*d))));
  if (const AttrValue* d = a.find("labels_dtype"); d && std::get<DType>(*d) != DType::Int32)
    ctx.fail("labels_dtype must be int32, got " + std::string(dtype_name(std::get<DType>(*d))));

  if (a.get_or<int64_t>("crop_padding", 0) < 0)
    ctx.fail("crop_padding must be >= 0, got " + std::to_string(a.get<int64_t>("crop_padding")));
  if (a.get_or<int64_t>("crop_seed", 0) < 0)
    ctx.fail("crop_seed must be >= 0, got " + std::to_string(a.get<int64_t>("crop_seed")));
  if (a.get_or<int64_t>("flip_seed", -1) < -1)
    ctx.fail("flip_seed must be >= 0, or -1 for no flips; got " + std::to_string(a.get<int64_t>("flip_seed")));
  const bool augments = a.get_or<int64_t>("crop_padding", 0) > 0 || a.get_or<int64_t>("flip_seed", -1) >= 0;
  // From the attribute only: inferring shapes opens no file, so loading or inspecting a graph
  // has no side effects (a path naming a FIFO or a device would block or consume it). The
  // kernel checks the file against it when it runs.
  const Shape example = a.get<Shape>("example_shape");
  for (int64_t d : example)
    if (d < 0) ctx.fail("example_shape " + example.to_string() + " has a negative dimension");
  if (augments && example.rank() != 2 && example.rank() != 3)
    ctx.fail("random crops and flips need image examples (H, W) or (H, W, C), got " + example.to_string());
  const int64_t rows = spec.drop_remainder ? shard_rows(spec.global_batch, spec.num_replicas, replica).count : -1;
  Shape features{rows};
  for (int64_t d : example) features.push_back(d);
  ctx.set_num_outputs(3);
  ctx.set_output(0, DType::Float32, features);
  ctx.set_output(1, DType::Int32, Shape{rows});
  ctx.set_output(2, DType::Float32, Shape{});
}

Cost read_cost(const InferContext& ctx) {
  const TensorMeta& f = ctx.output(0);
  int64_t n = 1;
  for (int64_t d : f.shape) n *= d < 0 ? 1 : d;
  return {.flops = static_cast<double>(n), .bytes = 5.0 * static_cast<double>(n)};
}

}  // namespace

void register_input_defs() {
  // Stateful: every run advances the cursor, so two reads are never merged or folded.
  op_registry().add({.name = "ReadShardedBatch", .display = "read_sharded_batch", .num_outputs = 3,
                     .attrs = {{"format", AttrType::String}, {"features", AttrType::String},
                               {"labels", AttrType::String}, {"global_batch", AttrType::Int},
                               {"replica", AttrType::Int}, {"num_replicas", AttrType::Int},
                               {"seed", AttrType::Int}, {"drop_remainder", AttrType::Bool},
                               {"scale", AttrType::Float}, {"source", AttrType::String},
                               {"example_shape", AttrType::Shape}, {"start_batch", AttrType::Int, false},
                               {"features_dtype", AttrType::Type, false}, {"labels_dtype", AttrType::Type, false},
                               {"crop_padding", AttrType::Int, false}, {"crop_seed", AttrType::Int, false},
                               {"flip_seed", AttrType::Int, false}},
                     .infer = infer_read_sharded_batch, .cost = read_cost,
                     .flags = kStateful | kSetsOutputs | kNotDifferentiable, .kernel_dtype_input = -1,
                     .file_attrs = {"features", "labels"}});
}

}  // namespace weft::defs
