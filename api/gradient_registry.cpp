#include "api/gradient_registry.h"

#include <mutex>
#include <unordered_map>

#include "api/dispatch.h"
#include "api/ops/array.h"
#include "api/ops/reduce.h"

namespace weft {

namespace {
std::mutex g_mu;
std::unordered_map<const OpDef*, GradFn>& table() {
  static auto* t = new std::unordered_map<const OpDef*, GradFn>();
  return *t;
}
}  // namespace

void register_gradient(std::string_view op, GradFn fn) {
  const OpDef& def = op_def(op);
  std::lock_guard<std::mutex> lock(g_mu);
  if (!table().emplace(&def, fn).second)
    throw InvalidArgument("[gradient_registry] gradient for " + std::string(op) + " registered twice");
}

GradFn find_gradient(const OpDef& op) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = table().find(&op);
  return it == table().end() ? nullptr : it->second;
}

Tensor unbroadcast(const Tensor& grad, const Tensor& like) {
  const Shape& gs = grad.shape();
  const Shape& ls = like.shape();
  if (gs == ls) return grad;
  std::vector<int64_t> axes;
  int64_t lead = gs.rank() - ls.rank();
  // An unknown dim of `like` is taken to match the gradient's (TensorFlow settles it at run time;
  // a traced batch dim is the common case and never broadcast). An unknown dim of the gradient
  // against a 1 is summed, which is right whatever its size turns out to be.
  for (int64_t i = 0; i < gs.rank(); ++i) {
    if (i < lead || (ls[i - lead] == 1 && gs[i] != 1)) axes.push_back(i);
  }
  Tensor summed = axes.empty() ? grad : reduce_sum(grad, axes, /*keepdims=*/true);
  return reshape_like(summed, like);
}

}  // namespace weft
