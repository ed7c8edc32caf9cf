// Front-end of pad and its gradient.
#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/array.h"

namespace weft {

Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& paddings, const SourceLocation& loc) {
  static const OpDef& op = op_def("Pad");
  std::vector<int64_t> flat;
  flat.reserve(2 * paddings.size());
  for (const auto& [before, after] : paddings) {
    flat.push_back(before);
    flat.push_back(after);
  }
  return dispatch1(op, {x}, {{"paddings", std::move(flat)}}, loc);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& before, const std::vector<int64_t>& after,
           const SourceLocation& loc) {
  if (before.size() != after.size())
    throw InvalidArgument("[pad] before has " + std::to_string(before.size()) + " entries but after has " +
                          std::to_string(after.size()) + "; give one of each per dim");
  std::vector<std::pair<int64_t, int64_t>> pairs;
  pairs.reserve(before.size());
  for (size_t i = 0; i < before.size(); ++i) pairs.emplace_back(before[i], after[i]);
  return pad(x, pairs, loc);
}

namespace {

// The input sits unchanged inside the output, so its gradient is that window of the output's.
std::vector<Tensor> pad_grad(const GradContext& g) {
  const auto& p = g.attrs.get<std::vector<int64_t>>("paddings");
  const Shape& in = g.input(0).shape();
  std::vector<int64_t> begin, size;
  for (int64_t i = 0; i < in.rank(); ++i) {
    begin.push_back(p[2 * i]);
    size.push_back(in[i]);
  }
  return {slice(g.grad(), begin, size)};
}

}  // namespace

// Called from register_array_gradients (pad is an array op kept in its own file).
void register_pad_gradients() { register_gradient("Pad", pad_grad); }

}  // namespace weft
