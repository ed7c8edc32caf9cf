#include "api/ops/collective.h"

#include "api/dispatch.h"

namespace weft::collective {

namespace {

Attrs group_attrs(const CollectiveGroup& g, int member, int64_t instance) {
  std::string joined;
  for (const std::string& m : g.members) joined += (joined.empty() ? "" : ",") + m;
  Attrs attrs{{"group_key", g.key},
              {"group_members", joined},
              {"member", int64_t{member}},
              {"instance_key", instance},
              {"group_instances", g.instances}};
  if (!g.nccl_id.empty()) attrs.set("nccl_id", g.nccl_id);
  return attrs;
}

}  // namespace

std::vector<Tensor> all_reduce(std::span<const Tensor> xs, const CollectiveGroup& group, int member, int64_t instance,
                               const std::string& reduction, const SourceLocation& loc) {
  static const OpDef& op = op_def("CollectiveAllReduce");
  Attrs attrs = group_attrs(group, member, instance);
  attrs.set("reduction", reduction);
  return dispatch(op, xs, attrs, loc);
}

Tensor all_reduce(const Tensor& x, const CollectiveGroup& group, int member, int64_t instance,
                  const std::string& reduction, const SourceLocation& loc) {
  return all_reduce(std::span<const Tensor>(&x, 1), group, member, instance, reduction, loc)[0];
}

Tensor broadcast_send(const Tensor& x, const CollectiveGroup& group, int member, int64_t instance,
                      const SourceLocation& loc) {
  static const OpDef& op = op_def("CollectiveBroadcast");
  Attrs attrs = group_attrs(group, member, instance);
  attrs.set("root", int64_t{member});
  return dispatch1(op, {x}, attrs, loc);
}

Tensor broadcast_recv(DType dtype, const Shape& shape, const CollectiveGroup& group, int member, int root,
                      int64_t instance, const SourceLocation& loc) {
  static const OpDef& op = op_def("CollectiveBroadcast");
  Attrs attrs = group_attrs(group, member, instance);
  attrs.set("root", int64_t{root});
  attrs.set("dtype", dtype);
  attrs.set("shape", shape);
  return dispatch1(op, std::span<const Tensor>(), attrs, loc);
}

Tensor all_gather(const Tensor& x, const CollectiveGroup& group, int member, int64_t instance,
                  const SourceLocation& loc) {
  static const OpDef& op = op_def("CollectiveAllGather");
  return dispatch1(op, {x}, group_attrs(group, member, instance), loc);
}

}  // namespace weft::collective
