#include "comm/collective_combine.h"

#include <cstring>

#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/tensor_internals.h"

namespace weft {

namespace {

template <class F>
void by_dtype(DType d, const std::string& op, F&& f) {
  switch (d) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    default: throw InvalidArgument("[" + op + "] has no " + std::string(dtype_name(d)) + " kernel (float32, float64, int32, int64)");
  }
}

std::string meta(DType d, const Shape& s) { return std::string(dtype_name(d)) + s.to_string(); }

void copy_into(Tensor& dst, int64_t offset, const Tensor& src) {
  if (src.nbytes() == 0) return;
  std::memcpy(static_cast<char*>(raw_data(dst)) + offset * static_cast<int64_t>(dtype_size(dst.dtype())),
              raw_data(src), src.nbytes());
}

std::vector<Tensor> unpack(const LocalCombination& c, const Tensor& flat) {
  if (c.shapes.size() == 1) return {flat.view(c.shapes[0])};
  std::vector<Tensor> outs;
  int64_t offset = 0;
  const auto elem = static_cast<int64_t>(dtype_size(flat.dtype()));
  for (const Shape& s : c.shapes) {
    Tensor t = Tensor::empty(flat.dtype(), s, cpu_device());
    if (t.nbytes()) std::memcpy(raw_data(t), static_cast<const char*>(raw_data(flat)) + offset * elem, t.nbytes());
    offset += s.num_elements();
    outs.push_back(std::move(t));
  }
  return outs;
}

Shape with_rows(const Shape& trailing, int64_t rows) {
  std::vector<int64_t> dims{rows};
  for (int64_t d : trailing) dims.push_back(d);
  return Shape(dims);
}

LocalCombination combine_all_reduce(const CollectiveParams& p, const std::vector<LocalContribution>& cs) {
  const std::string where = "[" + p.op + "] ";
  const std::vector<Tensor>& first = cs[0].inputs;
  if (first.empty()) throw InvalidArgument(where + "needs at least one input");
  LocalCombination c;
  const DType dtype = first[0].dtype();
  int64_t total = 0;
  for (const Tensor& t : first) {
    if (t.dtype() != dtype)
      throw InvalidArgument(where + "inputs of one member must share a dtype: " + meta(dtype, first[0].shape()) + " and " +
                            meta(t.dtype(), t.shape()));
    c.shapes.push_back(t.shape());
    total += t.size();
  }
  for (const LocalContribution& m : cs) {
    if (m.inputs.size() != first.size())
      throw InvalidArgument(where + "member " + std::to_string(m.member) + " gives " + std::to_string(m.inputs.size()) +
                            " inputs, member " + std::to_string(cs[0].member) + " " + std::to_string(first.size()));
    for (size_t i = 0; i < first.size(); ++i)
      if (m.inputs[i].dtype() != dtype || m.inputs[i].shape() != first[i].shape())
        throw InvalidArgument(where + "input " + std::to_string(i) + " of member " + std::to_string(m.member) + " is " +
                              meta(m.inputs[i].dtype(), m.inputs[i].shape()) + ", of member " +
                              std::to_string(cs[0].member) + " " + meta(dtype, first[i].shape()));
  }
  by_dtype(dtype, p.op, [](auto) {});
  if (cs.size() == 1 && first.size() == 1) {
    // One input of one member: no copy, the input is the local sum.
    c.packed = first[0].view(Shape({total}));
    c.packed_is_input = true;
    return c;
  }
  c.packed = Tensor::empty(dtype, Shape({total}), cpu_device());
  int64_t offset = 0;
  for (const Tensor& t : first) {
    copy_into(c.packed, offset, t);
    offset += t.size();
  }
  for (size_t m = 1; m < cs.size(); ++m) {
    offset = 0;
    for (const Tensor& t : cs[m].inputs) {
      add_into(c.packed, offset, t);
      offset += t.size();
    }
  }
  return c;
}

LocalCombination combine_broadcast(const CollectiveParams& p, const std::vector<LocalContribution>& cs) {
  const std::string where = "[" + p.op + "] ";
  LocalCombination c;
  const LocalContribution* root = nullptr;
  for (const LocalContribution& m : cs)
    if (m.member == p.root) root = &m;
  DType dtype;
  Shape shape;
  if (root) {
    if (root->inputs.size() != 1)
      throw InvalidArgument(where + "the root (member " + std::to_string(p.root) + ") needs exactly 1 input, got " +
                            std::to_string(root->inputs.size()));
    dtype = root->inputs[0].dtype();
    shape = root->inputs[0].shape();
  } else {
    dtype = cs[0].dtype;
    shape = cs[0].shape;
  }
  by_dtype(dtype, p.op, [](auto) {});
  for (const LocalContribution& m : cs) {
    if (&m == root) continue;
    if (!m.inputs.empty())
      throw InvalidArgument(where + "member " + std::to_string(m.member) + " is not the root and must have no input");
    if (m.dtype != dtype || m.shape != shape)
      throw InvalidArgument(where + "member " + std::to_string(m.member) + " expects " + meta(m.dtype, m.shape) +
                            " but the broadcast value is " + meta(dtype, shape));
  }
  for (int64_t d : shape)
    if (d < 0) throw InvalidArgument(where + "the shape to receive, " + shape.to_string() + ", must be fully known");
  if (root) {
    c.packed = root->inputs[0];
    c.packed_is_input = true;
  } else {
    c.packed = Tensor::empty(dtype, shape, cpu_device());
  }
  return c;
}

LocalCombination combine_all_gather(const CollectiveParams& p, const std::vector<LocalContribution>& cs) {
  const std::string where = "[" + p.op + "] ";
  LocalCombination c;
  for (const LocalContribution& m : cs)
    if (m.inputs.size() != 1 || m.inputs[0].rank() < 1)
      throw InvalidArgument(where + "member " + std::to_string(m.member) + " needs one input of rank >= 1");
  const Tensor& first = cs[0].inputs[0];
  by_dtype(first.dtype(), p.op, [](auto) {});
  std::vector<int64_t> trailing(first.shape().begin() + 1, first.shape().end());
  c.trailing = Shape(trailing);
  int64_t rows = 0;
  for (const LocalContribution& m : cs) {
    const Tensor& t = m.inputs[0];
    std::vector<int64_t> tr(t.shape().begin() + 1, t.shape().end());
    if (t.dtype() != first.dtype() || Shape(tr) != c.trailing)
      throw InvalidArgument(where + "member " + std::to_string(m.member) + " gives " + meta(t.dtype(), t.shape()) +
                            ", member " + std::to_string(cs[0].member) + " " + meta(first.dtype(), first.shape()) +
                            ": dtypes and every dim but the first must agree");
    rows += t.shape()[0];
  }
  if (cs.size() == 1) {
    c.packed = first;
    c.packed_is_input = true;
    return c;
  }
  c.packed = Tensor::empty(first.dtype(), with_rows(c.trailing, rows), cpu_device());
  int64_t offset = 0;
  for (const LocalContribution& m : cs) {
    copy_into(c.packed, offset, m.inputs[0]);
    offset += m.inputs[0].size();
  }
  return c;
}

}  // namespace

void add_into(Tensor& acc, int64_t offset, const Tensor& x) {
  by_dtype(acc.dtype(), "collective", [&](auto zero) {
    using T = decltype(zero);
    T* a = acc.data<T>() + offset;
    const T* b = x.data<T>();
    const int64_t n = x.size();
    for (int64_t i = 0; i < n; ++i) a[i] += b[i];
  });
}

void divide_by(Tensor& t, int64_t n) {
  if (n == 1) return;
  by_dtype(t.dtype(), "collective", [&](auto zero) {
    using T = decltype(zero);
    T* a = t.data<T>();
    const int64_t size = t.size();
    const T d = static_cast<T>(n);
    for (int64_t i = 0; i < size; ++i) a[i] /= d;
  });
}

LocalCombination combine_local(const CollectiveParams& p, const std::vector<LocalContribution>& contributions) {
  if (contributions.empty()) throw Internal("[" + p.op + "] no local contribution");
  switch (p.kind) {
    case CollectiveKind::kAllReduce: return combine_all_reduce(p, contributions);
    case CollectiveKind::kBroadcast: return combine_broadcast(p, contributions);
    case CollectiveKind::kAllGather: return combine_all_gather(p, contributions);
  }
  throw Internal("[" + p.op + "] unknown collective kind");
}

std::vector<Tensor> finish_local(const CollectiveParams& p, LocalCombination& c, int64_t group_size) {
  switch (p.kind) {
    case CollectiveKind::kAllReduce:
      if (p.reduction == CollectiveReduction::kMean && group_size > 1) {
        if (c.packed_is_input) throw Internal("[" + p.op + "] a mean over several members has its own buffer");
        divide_by(c.packed, group_size);
      }
      return unpack(c, c.packed);
    case CollectiveKind::kBroadcast:
      return {c.packed};
    case CollectiveKind::kAllGather:
      return {c.packed};
  }
  return {};
}

std::shared_ptr<CrossProcessCollective> make_cross(const CollectiveParams& p, const LocalCombination& c,
                                                   const std::vector<int>& member_ranks,
                                                   const std::vector<LocalContribution>& contributions) {
  auto x = std::make_shared<CrossProcessCollective>();
  x->kind = p.kind;
  x->op = p.op;
  x->send = c.packed;
  switch (p.kind) {
    case CollectiveKind::kAllReduce:
      // In place when the local sum has its own buffer; else straight from the input into a new one.
      x->result = c.packed_is_input ? Tensor::empty(c.packed.dtype(), c.packed.shape(), cpu_device()) : c.packed;
      break;
    case CollectiveKind::kBroadcast:
      x->result = c.packed;  // read on the root's process, written on the others
      x->root_rank = member_ranks[static_cast<size_t>(p.root)];
      break;
    case CollectiveKind::kAllGather:
      x->member_ranks = member_ranks;
      x->member_rows.assign(member_ranks.size(), -1);
      for (const LocalContribution& m : contributions)
        x->member_rows[static_cast<size_t>(m.member)] = m.inputs[0].shape()[0];
      break;
  }
  return x;
}

std::vector<Tensor> finish_cross(const CollectiveParams& p, const LocalCombination& c, CrossProcessCollective& x,
                                 int64_t group_size) {
  switch (p.kind) {
    case CollectiveKind::kAllReduce:
      if (p.reduction == CollectiveReduction::kMean) divide_by(x.result, group_size);
      return unpack(c, x.result);
    case CollectiveKind::kBroadcast:
      return {x.result};
    case CollectiveKind::kAllGather: {
      const int64_t row = c.trailing.num_elements();
      const int64_t rows = row == 0 ? 0 : x.result.size() / row;
      return {x.result.view(with_rows(c.trailing, rows))};
    }
  }
  return {};
}

}  // namespace weft
