// Split's shape inference: num_split equal parts along the axis, and bad attributes refused with
// an InvalidArgument naming the op, the input's shape and the attribute, before any kernel runs
// (a graph read from a file reaches the op without split()'s own checks).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/register_all.h"
#include "runtime/error.h"
#include "runtime/op_registry.h"
#include "runtime/tensor.h"

namespace weft {
namespace {

std::vector<TensorMeta> infer(const Shape& shape, int64_t axis, int64_t num) {
  register_builtin_ops();
  const OpDef& op = op_registry().get("Split");
  const std::vector<Tensor> ins = {Tensor::empty(float32, shape)};
  const Attrs attrs{{"axis", axis}, {"num_split", num}};
  InferContext ic(op, ins, attrs);
  op.infer(ic);
  std::vector<TensorMeta> out;
  for (int i = 0; i < ic.num_outputs(); ++i) out.push_back(ic.output(i));
  return out;
}

std::string error_of(const Shape& shape, int64_t axis, int64_t num) {
  try {
    infer(shape, axis, num);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no error";
}

TEST(SplitInfer, GivesEqualPartsAlongTheAxis) {
  const std::vector<TensorMeta> parts = infer(Shape{2, 6, 4}, -2, 3);
  ASSERT_EQ(parts.size(), 3u);
  for (const TensorMeta& m : parts) {
    EXPECT_EQ(m.shape, (Shape{2, 2, 4}));
    EXPECT_EQ(m.dtype, float32);
  }
  EXPECT_EQ(infer(Shape{5, 7}, 1, 1)[0].shape, (Shape{5, 7}));
}

TEST(SplitInfer, BadAttributesNameTheOpTheShapeAndTheAttribute) {
  const std::string uneven = error_of(Shape{2, 6, 4}, 1, 4);
  EXPECT_NE(uneven.find("split"), std::string::npos) << uneven;
  EXPECT_NE(uneven.find("(2, 6, 4)"), std::string::npos) << uneven;
  EXPECT_NE(uneven.find("4 equal parts"), std::string::npos) << uneven;
  const std::string none = error_of(Shape{2, 6}, 1, 0);
  EXPECT_NE(none.find("num_split = 0"), std::string::npos) << none;
  const std::string axis = error_of(Shape{2, 6}, 2, 2);
  EXPECT_NE(axis.find("axis"), std::string::npos) << axis;
}

}  // namespace
}  // namespace weft
