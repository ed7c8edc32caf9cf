// The view ops (reshape, expand_dims, squeeze, identity, stop_gradient, print): values, shapes,
// shared memory, error messages, and shape inference with unknown dims.
#include <memory>

#include "api/dispatch.h"
#include "array_test_util.h"
#include "runtime/op_registry.h"
#include "runtime/tensor_internals.h"

namespace weft {
namespace {

using testing_array::bytes_of;
using testing_array::dims_of;
using testing_array::expect_invalid;
using testing_array::kAllDTypes;
using testing_array::patterned;
using Dims = std::vector<int64_t>;

TEST(Reshape, KeepsValuesAndSharesMemory) {
  for (DType dt : kAllDTypes) {
    Tensor x = patterned(dt, {2, 3, 4});
    Tensor y = reshape(x, {4, 6});
    EXPECT_EQ(dims_of(y.shape()), (Dims{4, 6}));
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(raw_data(y), raw_data(x)) << dtype_name(dt);
    EXPECT_EQ(bytes_of(y), bytes_of(x));
  }
}

TEST(Reshape, InfersMinusOne) {
  Tensor x = range(0, 24);
  EXPECT_EQ(dims_of(reshape(x, {-1}).shape()), (Dims{24}));
  EXPECT_EQ(dims_of(reshape(x, {2, -1, 3}).shape()), (Dims{2, 4, 3}));
  EXPECT_EQ(dims_of(reshape(x, {-1, 1, 6}).shape()), (Dims{4, 1, 6}));
  EXPECT_EQ(reshape(x, {3, -1}).to_vector<int32_t>(), x.to_vector<int32_t>());
}

TEST(Reshape, ScalarsAndEmpty) {
  Tensor s = constant(5.f);
  Tensor v = reshape(s, {1, 1});
  EXPECT_EQ(dims_of(v.shape()), (Dims{1, 1}));
  EXPECT_EQ(reshape(v, Shape{}).item<float>(), 5.f);
  EXPECT_EQ(reshape(s, {-1}).to_vector<float>(), (std::vector<float>{5.f}));
  Tensor e = zeros({0, 3});
  EXPECT_EQ(dims_of(reshape(e, {3, 0, 7}).shape()), (Dims{3, 0, 7}));
  EXPECT_EQ(dims_of(reshape(e, {-1}).shape()), (Dims{0}));
}

TEST(Reshape, Errors) {
  Tensor x = zeros({2, 3});
  expect_invalid([&] { reshape(x, {4, -1}); }, {"[reshape]", "cannot reshape (2, 3) (6 elements) into (4, -1)"});
  expect_invalid([&] { reshape(x, {5}); }, {"[reshape]", "(5,)", "6 elements"});
  expect_invalid([&] { reshape(x, {-1, -1}); }, {"[reshape]", "only one dim may be -1"});
  expect_invalid([&] { reshape(x, {-2, -3}); }, {"[reshape]", "negative"});
  expect_invalid([&] { reshape(zeros({0, 3}), {0, -1}); }, {"[reshape]", "ambiguous"});
  expect_invalid([&] { reshape(x, {0, -1}); }, {"[reshape]", "into (0, -1)"});
  EXPECT_THROW(reshape(x, {7}), InvalidArgument);
}

TEST(ExpandDims, EveryAxisIncludingNegative) {
  Tensor x = patterned(float32, {3, 5});
  const std::pair<int64_t, Dims> cases[] = {{0, {1, 3, 5}},  {1, {3, 1, 5}},  {2, {3, 5, 1}},
                                            {-1, {3, 5, 1}}, {-2, {3, 1, 5}}, {-3, {1, 3, 5}}};
  for (const auto& [axis, want] : cases) {
    Tensor y = expand_dims(x, axis);
    EXPECT_EQ(dims_of(y.shape()), want) << "axis " << axis;
    EXPECT_EQ(raw_data(y), raw_data(x));
  }
  EXPECT_EQ(dims_of(expand_dims(constant(1), 0).shape()), (Dims{1}));
  EXPECT_EQ(dims_of(expand_dims(constant(1), -1).shape()), (Dims{1}));
}

TEST(ExpandDims, AxisOutOfRange) {
  expect_invalid([] { expand_dims(zeros({3, 5}), 3); }, {"[expand_dims]", "axis 3", "(3, 5)", "-3 to 2"});
  expect_invalid([] { expand_dims(zeros({3, 5}), -4); }, {"[expand_dims]", "axis -4"});
  expect_invalid([] { expand_dims(constant(1), 1); }, {"[expand_dims]"});
}

TEST(Squeeze, AllOnesOrChosenAxes) {
  Tensor x = patterned(int64, {1, 3, 1, 5, 1});
  EXPECT_EQ(dims_of(squeeze(x).shape()), (Dims{3, 5}));
  EXPECT_EQ(dims_of(squeeze(x, {0}).shape()), (Dims{3, 1, 5, 1}));
  EXPECT_EQ(dims_of(squeeze(x, {-1, 2}).shape()), (Dims{1, 3, 5}));
  EXPECT_EQ(dims_of(squeeze(x, {4, -1}).shape()), (Dims{1, 3, 1, 5}));  // one axis named twice
  EXPECT_EQ(raw_data(squeeze(x)), raw_data(x));
  EXPECT_EQ(bytes_of(squeeze(x)), bytes_of(x));
  EXPECT_EQ(dims_of(squeeze(zeros({1, 1})).shape()), Dims{});
  EXPECT_EQ(dims_of(squeeze(constant(2.f)).shape()), Dims{});
  EXPECT_EQ(dims_of(squeeze(zeros({0, 1})).shape()), (Dims{0}));
}

TEST(Squeeze, Errors) {
  expect_invalid([] { squeeze(zeros({1, 3}), {1}); }, {"[squeeze]", "cannot squeeze dim 1", "(1, 3)", "size is 3"});
  expect_invalid([] { squeeze(zeros({1, 3}), {2}); }, {"[squeeze]", "axis 2"});
  expect_invalid([] { squeeze(zeros({1, 3}), {-3}); }, {"[squeeze]", "axis -3"});
  expect_invalid([] { squeeze(constant(1.f), {0}); }, {"[squeeze]"});
}

TEST(Identity, SharesMemoryForEveryDType) {
  for (DType dt : kAllDTypes) {
    Tensor x = patterned(dt, {7});
    for (Tensor y : {identity(x), identity(x, "named"), stop_gradient(x)}) {
      EXPECT_EQ(raw_data(y), raw_data(x));
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_EQ(bytes_of(y), bytes_of(x));
      EXPECT_FALSE(y.same_as(x));
    }
  }
  EXPECT_EQ(identity(constant(3)).item<int32_t>(), 3);
}

TEST(Identity, OpFlags) {
  EXPECT_TRUE(op_def("StopGradient").has(kNotDifferentiable));
  EXPECT_TRUE(op_def("Print").has(kStateful));
  for (const char* name : {"Reshape", "ExpandDims", "Squeeze", "Identity", "StopGradient", "Print"})
    EXPECT_TRUE(op_def(name).has(kForwardsInput)) << name;
  for (const char* name : {"Transpose", "ConcatV2", "Slice", "GatherV2", "OneHot"})
    EXPECT_FALSE(op_def(name).has(kForwardsInput)) << name;
}

TEST(Print, WritesMessageAndValuesEveryRun) {
  Tensor x = constant({1, 2, 3});
  testing::internal::CaptureStderr();
  Tensor y = print(x, "x =");
  print(x, "again:");
  print(x);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "x = [1 2 3]\nagain: [1 2 3]\n[1 2 3]\n");
  EXPECT_EQ(raw_data(y), raw_data(x));
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3}));
}

TEST(Print, MatricesScalarsAndOtherDTypes) {
  testing::internal::CaptureStderr();
  print(constant({{1.5f, 2.f}, {3.f, 4.f}}), "m");
  print(constant(true), "flag ");
  print(constant({int64_t{7}}));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "m [[1.5   2]\n   [  3   4]]\nflag True\n[7]\n");
}

// Shape inference on symbolic inputs, as graph mode will run it: unknown dims (-1) pass through.
Shape infer(const char* op_name, std::vector<std::pair<DType, Shape>> inputs, const Attrs& attrs) {
  std::vector<Tensor> ts;
  for (auto& [dt, s] : inputs) ts.push_back(Tensor::symbolic(dt, s, std::make_unique<SymbolicRef>()));
  const OpDef& op = op_def(op_name);
  InferContext ctx(op, ts, attrs);
  op.infer(ctx);
  return ctx.output(0).shape;
}

TEST(ArrayInfer, UnknownDims) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(dims_of(infer("Reshape", {{float32, {-1, 3}}}, {{"shape", Shape{-1}}})), (Dims{-1}));
  EXPECT_EQ(dims_of(infer("Reshape", {{float32, {-1, 3}}}, {{"shape", Shape{2, -1, 3}}})), (Dims{2, -1, 3}));
  EXPECT_EQ(dims_of(infer("Reshape", {{float32, {-1, 3}}}, {{"shape", Shape{6, 2}}})), (Dims{6, 2}));
  EXPECT_THROW(infer("Reshape", {{float32, {-1, 3}}}, {{"shape", Shape{-1, -1}}}), InvalidArgument);
  EXPECT_EQ(dims_of(infer("Transpose", {{float32, {-1, 3, 5}}}, {{"perm", V{2, 0, 1}}})), (Dims{5, -1, 3}));
  EXPECT_EQ(dims_of(infer("ConcatV2", {{float32, {-1, 3}}, {float32, {4, -1}}}, {{"axis", int64_t{0}}})),
            (Dims{-1, 3}));
  EXPECT_EQ(dims_of(infer("ConcatV2", {{float32, {2, -1}}, {float32, {-1, 5}}}, {{"axis", int64_t{1}}})),
            (Dims{2, -1}));
  EXPECT_EQ(dims_of(infer("ConcatV2", {{float32, {2, 3}}, {float32, {-1, 5}}}, {{"axis", int64_t{1}}})),
            (Dims{2, 8}));
  EXPECT_THROW(infer("ConcatV2", {{float32, {2, -1}}, {float32, {3, 5}}}, {{"axis", int64_t{1}}}), InvalidArgument);
  EXPECT_EQ(dims_of(infer("Slice", {{float32, {-1, 10}}}, {{"begin", V{1, 2}}, {"size", V{-1, -1}}})),
            (Dims{-1, 8}));
  EXPECT_EQ(dims_of(infer("Slice", {{float32, {-1, 10}}}, {{"begin", V{1, 2}}, {"size", V{4, 3}}})), (Dims{4, 3}));
  EXPECT_EQ(dims_of(infer("GatherV2", {{float32, {-1, 7}}, {int32, {-1, 2}}}, {{"axis", int64_t{1}}})),
            (Dims{-1, -1, 2}));
  EXPECT_EQ(dims_of(infer("OneHot", {{int64, {-1}}}, {{"depth", int64_t{10}}})), (Dims{-1, 10}));
  EXPECT_EQ(dims_of(infer("ExpandDims", {{float32, {-1, 3}}}, {{"axis", int64_t{-1}}})), (Dims{-1, 3, 1}));
  EXPECT_EQ(dims_of(infer("Squeeze", {{float32, {-1, 1}}}, {{"axes", V{1}}})), (Dims{-1}));
  EXPECT_EQ(dims_of(infer("Squeeze", {{float32, {-1, 3}}}, {{"axes", V{0}}})), (Dims{3}));
  expect_invalid([&] { infer("Squeeze", {{float32, {-1, 1}}}, {}); }, {"[squeeze]", "unknown", "axes"});
  EXPECT_EQ(dims_of(infer("Identity", {{int8, {-1, -1}}}, {})), (Dims{-1, -1}));
  EXPECT_EQ(dims_of(infer("Print", {{int8, {-1}}}, {{"message", std::string("m")}})), (Dims{-1}));
}

}  // namespace
}  // namespace weft
