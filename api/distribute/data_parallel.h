// Data-parallel training over a cluster, in the style of TensorFlow's MirroredStrategy and
// PyTorch's DistributedDataParallel.
//
//   Cluster cluster = cluster::init(argc, argv);
//   distribute::DataParallel dp(cluster);            // a replica on every device of every task
//   auto step = dp.function([&](Tensor x, Tensor y) {
//     GradientTape tape;
//     Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
//     auto vars = model.trainable_variables();
//     opt.apply_gradients(tape.gradient(loss, vars), vars);   // gradients are all-reduced first
//     return loss;
//   });
//   Tensor loss = step(x_global, y_global);   // split along axis 0 over the replicas; the mean loss
//
// How it works:
// - The step is traced once (per argument dtypes and trailing dims; the batch dim is left free)
//   for replica 0. While it traces, Optimizer::apply_gradients hands its gradients to the replica
//   context (api/distribute/replica_context.h), which scales each by the replica's share of the
//   global batch and all-reduces them in buckets (api/distribute/gradient_buckets.h): one
//   CollectiveAllReduce node per bucket, started as soon as its gradients exist.
// - The trace is replicated once per replica into one global graph (api/distribute/replicate.h),
//   compiled like any cluster graph: placed, partitioned by task and device, each task's
//   partitions shipped once; per step only a step id and each replica's shard travel.
// - Variables: replica 0 is this process's (the chief's) first device and uses the model's own
//   variables, so they hold the trained values and checkpoints save them as in one process; every
//   other replica has copies, given replica 0's values (a broadcast) before the first step and
//   again whenever this process's variables were written outside the steps (a checkpoint
//   restore, an eager assign). Every replica applies the same all-reduced gradients, so the
//   copies stay identical, bit for bit.
// - step(x, y, ...) splits every argument along axis 0 into contiguous shards (replica r gets
//   rows [start_r, start_r + n_r), the first N % R replicas one row more) and returns each result
//   averaged over the global batch (results must be floating-point scalars). With one replica the
//   step is exactly weft::function's.
// - A failed step (an error on any replica) is raised here, naming the task, the node and the
//   user's line; the collectives and the replicas' variables are set right again before the next
//   step (collectives reset on every task, variables broadcast from replica 0).
// - Steps run one at a time (a step's collectives must not interleave with another's).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "api/data/sharded_input.h"
#include "api/distribute/replica_inputs.h"
#include "api/function_core.h"
#include "api/stall_limits.h"
#include "api/variable.h"
#include "runtime/tensor.h"

namespace weft {
class Cluster;
}

namespace weft::distribute {

struct DataParallelOptions {
  // Which devices get a replica: "CPU", "GPU", or "" for every GPU of the cluster when it has
  // any, else every CPU (each logical CPU of each task).
  std::string device_type;
  // Exactly these devices (full names or short forms of this process's), in replica order;
  // overrides device_type. Every task must hold at least one (the collectives span every task).
  std::vector<std::string> devices;
  // Gradient buckets (see api/distribute/gradient_buckets.h).
  int64_t bucket_bytes = 25ll << 20;
  int64_t first_bucket_bytes = 1ll << 20;
  // A step running longer is cancelled everywhere and raised as DeadlineExceeded; 0: none.
  int64_t operation_timeout_ms = 0;
  // Stall reports and the stall timeout, as SessionOptions's.
  int64_t stall_warning_ms = default_stall_warning_ms();
  int64_t stall_timeout_ms = default_stall_timeout_ms();
  bool optimize = true;  // the pass pipeline on the replicated graph
};

class DataParallelState;

// Type-erased: traces, replicates, compiles and runs steps (api/distribute/data_parallel.cpp).
class DataParallelCore {
 public:
  DataParallelCore(std::shared_ptr<DataParallelState> state, std::string name);
  ~DataParallelCore();
  // `args`: the global batch, split along axis 0. `body` gets replica 0's stand-ins.
  std::vector<Tensor> call(std::span<const Tensor> args, const FunctionBody& body);
  // Each replica reads its own arguments where it runs (`inputs`: api/distribute/replicate.h),
  // so nothing is fed: `specs` are the arguments' dtypes and shapes (batch dim -1), `input_key`
  // names the input (a different input is another trace).
  std::vector<Tensor> call_reading(const std::vector<TensorSpec>& specs, const std::string& input_key,
                                   const ReplicaInputs& inputs, const FunctionBody& body);
  int tracing_count() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

template <class F>
class DataParallelFunction {
 public:
  DataParallelFunction(F fn, std::shared_ptr<DataParallelState> state, std::string name)
      : fn_(std::make_shared<F>(std::move(fn))), core_(std::make_shared<DataParallelCore>(std::move(state), std::move(name))) {}

  // Every argument a Tensor of the global batch; returns what the body returns (a Tensor, a
  // std::vector<Tensor> or a tuple of Tensors), each averaged over the global batch.
  template <class... Args>
    requires(std::is_convertible_v<Args, Tensor> && ...)
  auto operator()(const Args&... args) {
    using R = std::invoke_result_t<F&, decltype(Tensor(args))...>;
    const std::array<Tensor, sizeof...(Args)> flat{Tensor(args)...};
    auto body = [&](std::span<const Tensor> stand_ins) -> std::vector<Tensor> {
      return invoke<R>(stand_ins, std::make_index_sequence<sizeof...(Args)>{});
    };
    return from_results<R>(core_->call(flat, FunctionBody(body)));
  }

  // Each replica reads its share of the next global batch of `input` on its own task (a
  // ReadShardedBatch node in its graph), so the chief sends no training data: the body gets
  // (features, labels) as float32 (n_r, example...) and int32 (n_r,).
  auto operator()(const data::ShardedInput& input) {
    using R = std::invoke_result_t<F&, Tensor, Tensor>;
    Shape features{-1};
    for (int64_t d : input.example_shape()) features.push_back(d);
    const std::vector<TensorSpec> specs{{DType::Float32, features}, {DType::Int32, Shape{-1}}};
    auto body = [&](std::span<const Tensor> stand_ins) -> std::vector<Tensor> {
      return invoke<R>(stand_ins, std::make_index_sequence<2>{});
    };
    const ReplicaInputs read = [&input](int64_t replica, int64_t replicas) { return input.read(replica, replicas); };
    return from_results<R>(core_->call_reading(specs, "sharded:" + input.source(), read, FunctionBody(body)));
  }

  int tracing_count() const { return core_->tracing_count(); }
  DataParallelCore& core() const { return *core_; }

 private:
  template <class R, size_t... I>
  std::vector<Tensor> invoke(std::span<const Tensor> s, std::index_sequence<I...>) {
    if constexpr (std::is_void_v<R>) {
      static_assert(!std::is_void_v<R>, "a data-parallel step returns its loss");
      return {};
    } else if constexpr (std::is_same_v<R, Tensor>) {
      return {(*fn_)(s[I]...)};
    } else if constexpr (std::is_same_v<R, std::vector<Tensor>>) {
      return (*fn_)(s[I]...);
    } else {
      return std::apply([](auto&&... t) { return std::vector<Tensor>{t...}; }, (*fn_)(s[I]...));
    }
  }
  template <class R>
  static R from_results(std::vector<Tensor>&& out) {
    if constexpr (std::is_same_v<R, Tensor>) {
      return std::move(out.at(0));
    } else if constexpr (std::is_same_v<R, std::vector<Tensor>>) {
      return std::move(out);
    } else {
      return [&]<size_t... I>(std::index_sequence<I...>) { return R{std::move(out.at(I))...}; }(
          std::make_index_sequence<std::tuple_size_v<R>>{});
    }
  }

  std::shared_ptr<F> fn_;
  std::shared_ptr<DataParallelCore> core_;
};

class DataParallel {
 public:
  // InvalidArgument for a device list naming a device the cluster does not have, or leaving a
  // task without a replica.
  explicit DataParallel(const Cluster& cluster, DataParallelOptions options = {});
  ~DataParallel();

  int num_replicas() const;
  // Full device names, in replica order (replica 0 first: this process's).
  const std::vector<std::string>& replica_devices() const;

  template <class F>
  DataParallelFunction<F> function(F fn, std::string name = "data_parallel_step") {
    return DataParallelFunction<F>(std::move(fn), state_, std::move(name));
  }

  // Gives every replica's variables the values of this process's (replica 0's) now; steps do it
  // by themselves when needed, so this is rarely called by hand.
  void broadcast_variables();

  // Each replica's value of `var` (a variable a traced step uses), in replica order, fetched to
  // this process: to check that the replicas agree.
  std::vector<Tensor> replica_values(const Variable& var);

 private:
  std::shared_ptr<DataParallelState> state_;
};

}  // namespace weft::distribute
