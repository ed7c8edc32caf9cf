#include "api/distribute/gradient_buckets.h"

#include <algorithm>
#include <map>

#include "api/ops/math.h"

namespace weft::distribute {

std::vector<std::vector<size_t>> plan_gradient_buckets(const std::vector<Tensor>& grads, const BucketOptions& options) {
  if (options.bucket_bytes <= 0 || options.first_bucket_bytes <= 0)
    throw InvalidArgument("[DataParallel] bucket sizes must be positive, got bucket_bytes " +
                          std::to_string(options.bucket_bytes) + " and first_bucket_bytes " +
                          std::to_string(options.first_bucket_bytes));
  struct Open {
    std::vector<size_t> members;
    int64_t bytes = 0;
  };
  std::vector<std::vector<size_t>> buckets;
  std::map<DType, Open> open;  // the bucket being filled, per dtype
  auto cap = [&] { return buckets.empty() ? options.first_bucket_bytes : options.bucket_bytes; };
  for (size_t k = grads.size(); k-- > 0;) {
    if (!grads[k].defined()) continue;
    const int64_t bytes = static_cast<int64_t>(grads[k].shape().num_elements()) *
                          static_cast<int64_t>(dtype_size(grads[k].dtype()));
    Open& o = open[grads[k].dtype()];
    if (!o.members.empty() && o.bytes + bytes > cap()) {
      buckets.push_back(std::move(o.members));
      o = Open{};
    }
    o.members.push_back(k);
    o.bytes += bytes;
    if (o.bytes >= cap()) {
      buckets.push_back(std::move(o.members));
      o = Open{};
    }
  }
  // What is left, in the order the dtypes' last gradients came.
  std::vector<std::pair<size_t, std::vector<size_t>>> rest;
  for (auto& [dtype, o] : open)
    if (!o.members.empty()) rest.emplace_back(o.members.back(), std::move(o.members));
  std::sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& [last, members] : rest) buckets.push_back(std::move(members));
  return buckets;
}

std::vector<Tensor> GradientAllReducer::all_reduce_gradients(const std::vector<Tensor>& grads,
                                                             const std::vector<Variable>& vars,
                                                             const std::source_location& loc) {
  (void)vars;
  std::map<DType, Tensor> weights;  // the replica's weight in each gradient dtype, cast once
  auto weight_in = [&](DType dtype) {
    Tensor& w = weights[dtype];
    if (!w.defined()) w = dtype == weight_.dtype() ? weight_ : cast(weight_, dtype, loc);
    return w;
  };
  std::vector<Tensor> reduced(grads.size());
  for (const std::vector<size_t>& bucket : plan_gradient_buckets(grads, options_)) {
    std::vector<Tensor> scaled;
    for (size_t k : bucket) scaled.push_back(mul(grads[k], weight_in(grads[k].dtype()), loc));
    std::vector<Tensor> out = collective::all_reduce(scaled, group_, /*member=*/0, next_instance_++, "sum", loc);
    for (size_t i = 0; i < bucket.size(); ++i) reduced[bucket[i]] = std::move(out[i]);
  }
  return reduced;
}

std::vector<Tensor> GradientAllReducer::all_reduce(const std::vector<Tensor>& xs, Reduction reduction,
                                                   const std::source_location& loc) {
  if (xs.empty()) return {};
  auto weight_in = [&](DType dtype) { return dtype == weight_.dtype() ? weight_ : cast(weight_, dtype, loc); };
  std::vector<Tensor> in = xs;
  if (reduction != Reduction::kSum)
    for (Tensor& x : in) x = mul(x, weight_in(x.dtype()), loc);
  std::vector<Tensor> out = collective::all_reduce(in, group_, /*member=*/0, next_instance_++, "sum", loc);
  if (reduction == Reduction::kGradientOfSum)
    // A replica without rows (weight 0) has its gradients scaled by 0 afterwards: any finite
    // value does here.
    for (Tensor& y : out) y = div(y, maximum(weight_in(y.dtype()), 1e-30, loc), loc);
  return out;
}

}  // namespace weft::distribute
