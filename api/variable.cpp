#include "api/variable.h"

#include <atomic>
#include <cstring>
#include <vector>

#include "api/context.h"
#include "api/devices.h"
#include "api/graph_builder.h"
#include "api/ops/array.h"
#include "api/ops/math.h"
#include "runtime/tensor_internals.h"

namespace weft {

namespace {
VariableReadHook g_read_hook = nullptr;

Tensor copy_of(const Tensor& t) {
  if (t.is_symbolic()) throw InvalidArgument("[Variable] initial value must be a concrete tensor, got " + t.name());
  Tensor out = Tensor::empty(t.dtype(), t.shape(), t.device_ptr());
  if (t.nbytes()) t.device_ptr()->copy_on_device(raw_data(t), raw_data(out), t.nbytes());
  return out;
}

// True when `t` (and its buffer) are referenced only by the variable, so writing in place is
// invisible to anyone else.
bool exclusively_owned(const Tensor& t) {
  const TensorImpl* impl = tensor_impl(t);
  return impl->ref_count() == 1 && impl->buffer && impl->buffer->ref_count() == 1;
}

}  // namespace

namespace {
std::atomic<uint64_t> g_eager_variable_writes{0};
}  // namespace

uint64_t eager_variable_writes() { return g_eager_variable_writes.load(std::memory_order_acquire); }
void note_eager_variable_write() { g_eager_variable_writes.fetch_add(1, std::memory_order_acq_rel); }

void set_variable_read_hook(VariableReadHook hook) { g_read_hook = hook; }

Variable::Variable(const Tensor& initial_value, const std::string& name, bool trainable, const SourceLocation& loc)
    : state_(std::make_shared<VariableState>()) {
  if (!initial_value.defined()) throw InvalidArgument("[Variable] '" + name + "' has an empty initial value");
  state_->name = name;
  state_->trainable = trainable;
  state_->dtype = initial_value.dtype();
  state_->shape = initial_value.shape();
  state_->device = current_device_request();
  if (GraphBuilder* b = current_builder()) {
    if (initial_value.is_symbolic() && !initial_value.shape().is_fully_defined())
      throw InvalidArgument("[Variable] '" + name + "' needs a fully known shape, got " +
                            initial_value.shape().to_string());
    b->on_variable_created(state_, initial_value, loc);
  }
  if (!initial_value.is_symbolic()) state_->value = copy_of(initial_value);
}

VariableState& Variable::checked() const {
  if (!state_) throw FailedPrecondition("[Variable] use of an uninitialised (default-constructed) Variable");
  return *state_;
}

Tensor Variable::value(const SourceLocation& loc) const { return read(loc); }

Tensor Variable::read(const std::optional<SourceLocation>& loc) const {
  VariableState& s = checked();
  if (GraphBuilder* b = current_builder()) {
    Tensor read = b->read_variable(state_, /*for_update=*/false, loc);
    if (g_read_hook && !eager_context().observers.empty()) g_read_hook(*this, read);
    return read;
  }
  if (!s.value.defined())
    throw FailedPrecondition("[Variable] '" + s.name + "' is not initialised: it was created in a Graph, whose "
                             "Session initialises it on its first run");
  if (g_read_hook && !eager_context().observers.empty()) g_read_hook(*this, s.value);
  return s.value;
}

// The value after the assignment node `write`: a read wrapped in an Identity that depends on the
// write. The Session treats the read's own ordering after the write as "if both run" (a plain
// read never runs an assignment); the Identity's dependency is one the user asked for, so fetching
// or targeting the result runs the assignment.
Tensor Variable::value_after(GraphBuilder& b, int32_t write, const SourceLocation& loc) const {
  Tensor read = b.read_variable(state_, /*for_update=*/false, loc);
  Tensor out = identity(read, "", loc);
  b.graph().add_control_input(static_cast<int32_t>(out.symbolic_ref()->node_id), write);
  return out;
}

Tensor Variable::assign(const Tensor& value, const SourceLocation& loc) {
  VariableState& s = checked();
  if (!value.defined()) throw InvalidArgument("[assign] variable '" + s.name + "': empty Tensor handle");
  if (GraphBuilder* b = current_builder())
    return value_after(*b, b->assign_variable(state_, value, "AssignVariable", loc), loc);
  if (value.dtype() != s.dtype || value.shape() != s.shape)
    throw InvalidArgument("[assign] variable '" + s.name + "' has dtype " + std::string(dtype_name(s.dtype)) +
                          " and shape " + s.shape.to_string() + "; cannot assign " +
                          std::string(dtype_name(value.dtype())) + " " + value.shape().to_string());
  if (value.is_symbolic())
    throw InvalidArgument("[assign] variable '" + s.name + "': cannot assign a symbolic tensor eagerly");
  note_eager_variable_write();
  Tensor moved = value.to(s.value.device_ptr());
  if (exclusively_owned(s.value) && s.value.nbytes()) {
    s.value.device_ptr()->copy_on_device(raw_data(moved), raw_data(s.value), s.value.nbytes());
  } else {
    s.value = moved.same_as(value) ? copy_of(value) : moved;
  }
  return s.value;
}

// The result is a fresh tensor nobody else holds, so it simply becomes the value: no copy, and
// the old buffer goes back to the allocator's cache for the next step. Tapes do not see the
// arithmetic: an assignment is not part of any gradient.
Tensor Variable::assign_combined(const Tensor& delta, Combine combine, const char* op, const SourceLocation& loc) {
  VariableState& s = checked();
  if (GraphBuilder* b = current_builder()) {
    const bool add_op = std::string_view(op) == "assign_add";
    return value_after(*b, b->assign_variable(state_, delta, add_op ? "AssignAddVariable" : "AssignSubVariable", loc),
                       loc);
  }
  note_eager_variable_write();
  Tensor result;
  {
    // An assignment is not differentiable (as in TensorFlow): its arithmetic is hidden from every
    // recording tape, so the variable's next read starts a fresh path instead of chaining
    // gradients through the variable's history.
    ObserversHidden paused;
    result = combine(s.value, delta, loc);
  }
  if (result.shape() != s.value.shape())
    throw InvalidArgument(std::string("[") + op + "] variable '" + s.name + "' has shape " +
                          s.value.shape().to_string() + "; the update broadcasts to " + result.shape().to_string());
  s.value = std::move(result);
  return s.value;
}

void Variable::restore(const Tensor& value) {
  VariableState& s = checked();
  if (!value.defined() || value.is_symbolic())
    throw InvalidArgument("[restore] variable '" + s.name + "' needs a concrete value");
  if (value.dtype() != s.dtype || value.shape() != s.shape)
    throw InvalidArgument("[restore] variable '" + s.name + "' has dtype " + std::string(dtype_name(s.dtype)) +
                          " and shape " + s.shape.to_string() + "; the value is " + std::string(dtype_name(value.dtype())) +
                          " " + value.shape().to_string());
  Device* device = s.value.defined() ? s.value.device_ptr() : value.device_ptr();
  note_eager_variable_write();
  s.value = value.to(device);
}

Tensor Variable::assign_add(const Tensor& delta, const SourceLocation& loc) {
  return assign_combined(delta, add, "assign_add", loc);
}
Tensor Variable::assign_sub(const Tensor& delta, const SourceLocation& loc) {
  return assign_combined(delta, sub, "assign_sub", loc);
}

Tensor Variable::value_for_update(const SourceLocation& loc) {
  VariableState& s = checked();
  if (GraphBuilder* b = current_builder()) return b->read_variable(state_, /*for_update=*/true, loc);
  note_eager_variable_write();  // the caller is about to update the buffer in place
  if (!exclusively_owned(s.value)) s.value = copy_of(s.value);
  return s.value;
}

const std::string& Variable::name() const { return checked().name; }
bool Variable::trainable() const { return checked().trainable; }
DType Variable::dtype() const { return checked().dtype; }
const Shape& Variable::shape() const { return checked().shape; }

}  // namespace weft
