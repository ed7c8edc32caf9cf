// Definitions of the ops the partitioner puts on every edge that crosses devices:
//
//   Send(value)  -> ()       in the producer's subgraph; hands `value` to the rendezvous
//   Recv()       -> value    in the consumer's subgraph; takes it from the rendezvous
//
// Both carry the parts of the rendezvous key but the step id, which comes at run time
// (runtime/rendezvous.h: rendezvous_key_of): send_device, send_device_incarnation, recv_device
// and tensor_name. Recv also carries the dtype and
// shape of what it will receive, so the consumer's subgraph infers shapes without the producer.
//
// Flags: stateful (never merged by CSE: two Recvs of equal attributes in two steps are two
// transfers) and not differentiable; Send has a side effect, so a subgraph whose only job is to
// send still runs it; Recv sets its output itself (the buffer arrives from the producer).
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"
#include "runtime/rendezvous.h"

namespace weft::defs {

namespace {

// The whole key is checked here, once per node, so the kernels build it without checking.
void check_key(InferContext& ctx) {
  for (const char* attr : {"send_device", "recv_device", "tensor_name"})
    if (ctx.attrs().get<std::string>(attr).empty()) ctx.fail("attribute '" + std::string(attr) + "' is empty");
  try {
    (void)rendezvous_key_of(ctx.attrs(), 0);
  } catch (const Error& e) {
    ctx.fail(e.what());
  }
}

void infer_send(InferContext& ctx) {
  check_key(ctx);
  ctx.set_num_outputs(0);
}

void infer_recv(InferContext& ctx) {
  check_key(ctx);
  const Shape& shape = ctx.attrs().get<Shape>("shape");
  for (int64_t d : shape)
    if (d < -1) ctx.fail("shape " + shape.to_string() + " has a dimension below -1");
  ctx.set_output(0, ctx.attrs().get<DType>("dtype"), shape);
}

// Moving the bytes is the cost; the link model of placement prices it, not the device's flops.
Cost transfer_cost(const InferContext&) { return {}; }

}  // namespace

void register_transfer_defs() {
  const std::vector<AttrSpec> key_attrs = {{"send_device", AttrType::String},
                                           {"send_device_incarnation", AttrType::Int},
                                           {"recv_device", AttrType::String},
                                           {"tensor_name", AttrType::String}};
  op_registry().add({.name = "Send", .display = "send", .min_inputs = 1, .max_inputs = 1, .num_outputs = 0,
                     .attrs = key_attrs, .infer = infer_send, .cost = transfer_cost,
                     .flags = kStateful | kSideEffect | kNotDifferentiable});
  std::vector<AttrSpec> recv_attrs = key_attrs;
  recv_attrs.push_back({"dtype", AttrType::Type});
  recv_attrs.push_back({"shape", AttrType::Shape});
  op_registry().add({.name = "Recv", .display = "recv", .attrs = std::move(recv_attrs), .infer = infer_recv,
                     .cost = transfer_cost, .flags = kStateful | kSetsOutputs | kNotDifferentiable,
                     .kernel_dtype_input = -1});
}

}  // namespace weft::defs
