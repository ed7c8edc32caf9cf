// The op registry (lookups, duplicate names, suggestions), kernel slots and attributes.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "kernels/register_all.h"
#include "runtime/attr.h"
#include "runtime/kernel_registry.h"
#include "runtime/op_registry.h"

namespace weft {
namespace {

void infer_nothing(InferContext& ctx) { ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0)); }

OpDef simple(const std::string& name) {
  return {.name = name, .min_inputs = 1, .max_inputs = 1, .infer = infer_nothing};
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no exception>";
}

TEST(OpRegistry, AddFindGet) {
  OpRegistry r;
  OpDef& def = r.add(simple("Frobnicate"));
  EXPECT_EQ(def.display, "Frobnicate") << "display defaults to the name";
  EXPECT_EQ(r.find("Frobnicate"), &def);
  EXPECT_EQ(&r.get("Frobnicate"), &def);
  EXPECT_EQ(r.find("frobnicate"), nullptr) << "names are case-sensitive";
  // References stay valid while the registry grows.
  for (int i = 0; i < 500; ++i) r.add(simple("Op" + std::to_string(i)));
  EXPECT_EQ(r.find("Frobnicate"), &def);
  EXPECT_EQ(r.all().size(), 501u);
  EXPECT_EQ(r.all().front(), &def);
}

TEST(OpRegistry, DuplicateRegistrationThrows) {
  OpRegistry r;
  r.add(simple("Twice"));
  try {
    r.add(simple("Twice"));
    ADD_FAILURE() << "registered twice";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("Twice"), std::string::npos) << e.what();
  }
  EXPECT_EQ(r.all().size(), 1u);
}

TEST(OpRegistry, UnknownNameIsNotFoundWithSuggestion) {
  OpRegistry r;
  r.add(simple("MatMul"));
  r.add(simple("Maximum"));
  r.add(simple("Add"));
  EXPECT_THROW(r.get("Addd"), NotFound);
  std::string msg = message_of([&] { r.get("Addd"); });
  EXPECT_NE(msg.find("'Addd'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'Add'"), std::string::npos) << msg;
  msg = message_of([&] { r.get("Matmul"); });
  EXPECT_NE(msg.find("did you mean 'MatMul'"), std::string::npos) << msg;
  msg = message_of([&] { r.get("CompletelyDifferent"); });
  EXPECT_NE(msg.find("CompletelyDifferent"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
  EXPECT_THROW(OpRegistry().get("Anything"), NotFound);  // empty registry
}

TEST(OpRegistry, BuiltinsAreRegisteredWithKernels) {
  register_builtin_ops();
  register_builtin_ops();  // idempotent
  const char* ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Maximum", "Minimum", "Neg", "Abs", "Sign",
                       "Exp", "Log", "Sqrt", "Rsqrt", "Square", "Equal", "NotEqual", "Less", "LessEqual",
                       "Greater", "GreaterEqual", "Select", "Cast", "Fill", "Range"};
  for (const char* name : ops) {
    const OpDef* def = op_registry().find(name);
    ASSERT_NE(def, nullptr) << name;
    EXPECT_NE(def->infer, nullptr) << name;
    EXPECT_FALSE(def->display.empty()) << name;
    EXPECT_NE(find_kernel(*def, DeviceType::CPU, float32), nullptr) << name;
  }
  EXPECT_EQ(op_registry().get("Select").display, "where");
  EXPECT_TRUE(op_registry().get("Add").has(kCommutative));
  EXPECT_FALSE(op_registry().get("Sub").has(kCommutative));
  EXPECT_EQ(find_kernel(op_registry().get("Exp"), DeviceType::CPU, int32), nullptr);
  for (int d = 0; d < kNumDTypes; ++d)
    EXPECT_NE(find_kernel(op_registry().get("Cast"), DeviceType::CPU, static_cast<DType>(d)), nullptr);
}

TEST(KernelRegistry, TakenSlotAndUnknownOpThrow) {
  register_builtin_ops();
  auto k = [](KernelContext&) {};
  EXPECT_THROW(register_kernel("Add", DeviceType::CPU, float32, k), InvalidArgument);
  EXPECT_THROW(register_kernel("NoSuchOpAnywhere", DeviceType::CPU, float32, k), NotFound);
}

TEST(InferContext, FailNamesTheOpByDisplayName) {
  OpDef def = simple("SomeOp");
  def.display = "some_op";
  Attrs attrs;
  InferContext ctx(def, {}, attrs);
  std::string msg = message_of([&] { ctx.fail("bad things"); });
  EXPECT_EQ(msg, "[some_op] bad things");
  EXPECT_THROW(ctx.fail("x"), InvalidArgument);
}

TEST(InferContext, DefaultCostCountsBytesAndFlops) {
  OpDef def = simple("C");
  Tensor in = Tensor::empty(float32, Shape{10, 10});
  Attrs attrs;
  InferContext ctx(def, std::span<const Tensor>(&in, 1), attrs);
  ctx.set_output(0, float64, Shape{100});
  Cost c = def.estimate_cost(ctx);
  EXPECT_EQ(c.flops, 100);
  EXPECT_EQ(c.bytes, 100 * 4 + 100 * 8);
  ctx.set_num_outputs(4);  // beyond the inline outputs
  ctx.set_output(3, int8, Shape{7});
  EXPECT_EQ(ctx.output(3).shape, Shape{7});
  EXPECT_EQ(ctx.output(3).dtype, int8);
}

TEST(Attrs, GetSetAndTypeErrors) {
  Attrs a{{"axis", int64_t{2}}, {"dtype", float64}};
  EXPECT_EQ(a.get<int64_t>("axis"), 2);
  EXPECT_EQ(a.get<DType>("dtype"), float64);
  a.set("axis", int64_t{-1});
  EXPECT_EQ(a.get<int64_t>("axis"), -1);
  EXPECT_EQ(a.size(), 2u);
  a.set("shape", Shape{2, 3});
  EXPECT_EQ(a.get<Shape>("shape"), (Shape{2, 3}));
  EXPECT_EQ(a.get_or<double>("missing", 1.5), 1.5);
  EXPECT_THROW(a.get<double>("axis"), InvalidArgument);
  EXPECT_THROW(a.get<int64_t>("nope"), InvalidArgument);
  EXPECT_THROW(a.get_or<bool>("axis", true), InvalidArgument);
  EXPECT_NE(message_of([&] { a.get<double>("axis"); }).find("int"), std::string::npos);
  EXPECT_EQ(attr_type(AttrValue{std::string("s")}), AttrType::String);
  EXPECT_STREQ(attr_type_name(AttrType::IntList), "int list");
}

}  // namespace
}  // namespace weft
