// Variables on the GPU, through the kernels the executor runs (Const, ReadVariable,
// ReadVariableForUpdate, AssignVariable, AssignAddVariable, AssignSubVariable): assignments made
// on the GPU keep the value in GPU memory, add/sub update that buffer in place, and reads hand it
// over; every result equals the same sequence run on the CPU.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "runtime/error.h"
#include "runtime/graph.h"
#include "runtime/run_context.h"
#include "runtime/tensor_internals.h"

namespace weft::gpu_test {
namespace {

// What the executor provides to variable kernels: the graph's variables by name.
class Variables final : public RunContext {
 public:
  VariableState& add(const std::string& name, DType dtype, const Shape& shape) {
    VariableState& v = vars_[name];
    v.name = name;
    v.dtype = dtype;
    v.shape = shape;
    return v;
  }
  VariableState& variable(std::string_view name) override {
    auto it = vars_.find(name);
    if (it == vars_.end()) throw NotFound("no variable " + std::string(name));
    return it->second;
  }
  std::vector<Tensor> call(const GraphIR&, std::span<const Tensor>, Device&) override {
    throw Internal("the variable tests run no function bodies");
  }

 private:
  std::map<std::string, VariableState, std::less<>> vars_;
};

Attrs var_attrs(const VariableState& v) { return Attrs{{"var", v.name}, {"dtype", v.dtype}, {"shape", v.shape}}; }

// Runs a graph op's kernel on `device` with `vars` as the executor's context; inputs are moved to
// `device` first. Returns output 0 where the op has one.
Tensor run_var_op(Device& device, std::string_view name, Variables& vars, const Attrs& attrs,
                  const std::vector<Tensor>& inputs = {}, const TensorMeta& out = {}) {
  const OpDef* op = op_registry().find(name);
  if (!op) throw InvalidArgument("no op " + std::string(name));
  const DType dt = inputs.empty() ? out.dtype : inputs[0].dtype();
  KernelFn fn = find_kernel(*op, device.type(), dt);
  if (!fn) throw InvalidArgument("no kernel for " + std::string(name) + " " + std::string(dtype_name(dt)));
  std::vector<Tensor> ins;
  for (const Tensor& t : inputs) ins.push_back(t.to(&device));
  std::vector<Tensor> outs(static_cast<size_t>(op->num_outputs > 0 ? 1 : 0));
  run_kernel(*op, fn, device, attrs, ins, outs, [&](size_t) { return out; }, &vars);
  return outs.empty() ? Tensor() : outs[0];
}

// assign, assign_add, assign_sub, read: on `device`, returning the host values read back after
// each step and checking on a GPU that the buffer never moves once assigned.
std::vector<Tensor> assign_sequence(Device& device, DType dt, uint64_t seed) {
  const Shape shape{1000, 3};
  Variables vars;
  VariableState& v = vars.add("w", dt, shape);
  const Attrs attrs = var_attrs(v);
  const TensorMeta meta{dt, shape};
  std::vector<Tensor> seen;
  run_var_op(device, "AssignVariable", vars, attrs, {random_tensor(dt, shape, seed, Values::kGeneral)});
  EXPECT_EQ(v.value.device_ptr(), &device);
  const void* buffer = raw_data(v.value);
  seen.push_back(run_var_op(device, "ReadVariable", vars, attrs, {}, meta).to(cpu_device()));
  run_var_op(device, "AssignAddVariable", vars, attrs, {random_tensor(dt, shape, seed + 1, Values::kGeneral)});
  seen.push_back(run_var_op(device, "ReadVariable", vars, attrs, {}, meta).to(cpu_device()));
  run_var_op(device, "AssignSubVariable", vars, attrs, {random_tensor(dt, shape, seed + 2, Values::kGeneral)});
  Tensor read = run_var_op(device, "ReadVariable", vars, attrs, {}, meta);
  EXPECT_EQ(read.device_ptr(), &device);
  seen.push_back(read.to(cpu_device()));
  if (device.type() == DeviceType::CUDA) {
    // The first ReadVariable's result was copied to the host and dropped, so nothing else held the
    // buffer when add and sub ran: both wrote it in place.
    EXPECT_EQ(raw_data(v.value), buffer) << dtype_name(dt);
  }
  return seen;
}

TEST(CudaVariables, AssignAddSubAndReadMatchCpu) {
  WEFT_REQUIRE_GPU();
  uint64_t seed = 1;
  for (DType dt : {float32, float64, int8, uint8, int32, int64}) {
    // Integer extremes are part of the values: add and sub wrap on both devices.
    std::vector<Tensor> want = assign_sequence(*cpu_device(), dt, seed);
    std::vector<Tensor> got = assign_sequence(*gpu(), dt, seed);
    seed += 3;
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(same_values(want[i], got[i], 0)) << dtype_name(dt) << " step " << i;
  }
}

TEST(CudaVariables, UpdateCopiesASharedBufferFirst) {
  WEFT_REQUIRE_GPU();
  Variables vars;
  VariableState& v = vars.add("w", float32, Shape{64});
  const Attrs attrs = var_attrs(v);
  const TensorMeta meta{float32, Shape{64}};
  Tensor init = random_tensor(float32, Shape{64}, 5, Values::kGeneral);
  run_var_op(*gpu(), "AssignVariable", vars, attrs, {init});
  Tensor held = run_var_op(*gpu(), "ReadVariable", vars, attrs, {}, meta);  // shares the buffer
  Tensor delta = random_tensor(float32, Shape{64}, 6, Values::kGeneral);
  run_var_op(*gpu(), "AssignAddVariable", vars, attrs, {delta});
  EXPECT_NE(raw_data(v.value), raw_data(held)) << "a shared buffer must not be written";
  EXPECT_TRUE(same_values(init, held.to(cpu_device()), 0)) << "the earlier read kept its value";
  Tensor want = run_on(*cpu_device(), "Add", {init, delta}, float32, Shape{64});
  EXPECT_TRUE(same_values(want, v.value.to(cpu_device()), 0));
  // ReadVariableForUpdate hands over a private buffer, which later updates keep.
  held = Tensor();
  Tensor for_update = run_var_op(*gpu(), "ReadVariableForUpdate", vars, attrs, {}, meta);
  EXPECT_EQ(raw_data(for_update), raw_data(v.value));
  EXPECT_EQ(for_update.device_ptr(), gpu());
}

TEST(CudaVariables, AHostValueMovesToTheGpuOnceThenUpdatesInPlace) {
  WEFT_REQUIRE_GPU();
  Variables vars;
  VariableState& v = vars.add("w", int64, Shape{5});
  v.value = random_tensor(int64, Shape{5}, 9, Values::kGeneral);  // made eagerly, on the CPU
  const Tensor host_value = v.value;
  const Attrs attrs = var_attrs(v);
  Tensor read = run_var_op(*gpu(), "ReadVariable", vars, attrs, {}, {int64, Shape{5}});
  EXPECT_EQ(read.device_ptr(), gpu());
  EXPECT_EQ(v.value.device_ptr(), gpu());
  EXPECT_TRUE(same_values(host_value, read.to(cpu_device()), 0));
  read = Tensor();
  const void* buffer = raw_data(v.value);
  Tensor delta = random_tensor(int64, Shape{5}, 10, Values::kGeneral);
  run_var_op(*gpu(), "AssignAddVariable", vars, attrs, {delta});
  EXPECT_EQ(raw_data(v.value), buffer);
  EXPECT_TRUE(same_values(run_on(*cpu_device(), "Add", {host_value, delta}, int64, Shape{5}), v.value.to(cpu_device()), 0));
}

TEST(CudaVariables, ConstIsMadeOnTheGpu) {
  WEFT_REQUIRE_GPU();
  Variables vars;
  for (DType dt : {float16, bfloat16, float32, int8, bool_}) {
    Tensor value = random_tensor(dt, Shape{3, 7}, 11, Values::kAllBits);
    Tensor got = run_var_op(*gpu(), "Const", vars, Attrs{{"value", value}}, {}, {dt, Shape{3, 7}});
    EXPECT_EQ(got.device_ptr(), gpu());
    EXPECT_EQ(host_bytes(got), host_bytes(value)) << dtype_name(dt);
  }
}

TEST(CudaVariables, BadUpdatesFailLikeTheCpu) {
  WEFT_REQUIRE_GPU();
  for (Device* device : {cpu_device(), gpu()}) {
    Variables vars;
    VariableState& v = vars.add("w", float32, Shape{4});
    const Attrs attrs = var_attrs(v);
    // Read before initialisation.
    EXPECT_THROW(run_var_op(*device, "ReadVariable", vars, attrs, {}, {float32, Shape{4}}), FailedPrecondition);
    EXPECT_THROW(run_var_op(*device, "AssignAddVariable", vars, attrs, {random_tensor(float32, Shape{4}, 1, Values::kGeneral)}),
                 FailedPrecondition);
    run_var_op(*device, "AssignVariable", vars, attrs, {random_tensor(float32, Shape{4}, 2, Values::kGeneral)});
    try {
      run_var_op(*device, "AssignSubVariable", vars, attrs, {random_tensor(float32, Shape{5}, 3, Values::kGeneral)});
      ADD_FAILURE() << "expected InvalidArgument on " << device->name();
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("variable 'w' has shape (4,), the value has shape (5,)"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace weft::gpu_test
