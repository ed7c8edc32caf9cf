// TF1-style Graph + Session.
#include "api/session.h"

#include <gtest/gtest.h>

#include "api/ops/array.h"
#include "api/ops/creation.h"
#include "api/ops/linalg.h"
#include "api/ops/math.h"
#include "api/ops/nn.h"
#include "api/ops/random.h"
#include "api/variable.h"

namespace weft {
namespace {

TEST(GraphSession, FeedsAndFetchesByName) {
  Graph g;
  {
    GraphScope scope(g);
    Tensor x = placeholder(float32, {-1, 2}, "x");
    Tensor w = constant({{1.f, 0.f}, {0.f, 2.f}});
    identity(matmul(x, w), "y");
  }
  Session sess(g);
  auto out = sess.run({{"x:0", constant({{1.f, 1.f}, {2.f, 3.f}})}}, {"y:0"});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1.f, 2.f, 2.f, 6.f}));
  EXPECT_EQ(g.operation("y").type(), "Identity");
  EXPECT_EQ(g.tensor("y:0").shape(), (Shape{-1, 2}));
}

TEST(GraphSession, NodeNamesAreUniqueAndScoped) {
  Graph g;
  Tensor a, b, c;
  {
    GraphScope scope(g);
    a = placeholder(float32, {2}, "x");
    b = a + a;
    c = b + a;
    NameScope layer("dense1");
    Tensor d = c * b;
    EXPECT_EQ(d.name(), "dense1/Mul:0");
  }
  EXPECT_EQ(b.name(), "Add:0");
  EXPECT_EQ(c.name(), "Add_1:0");
  EXPECT_TRUE(b.is_symbolic());
  std::ostringstream os;
  os << c;
  EXPECT_EQ(os.str(), "Tensor(\"Add_1:0\", shape=(2,), dtype=float32)");
  EXPECT_EQ(g.operation("Add_1").inputs().size(), 2u);
  EXPECT_NE(g.operation("Add").source_location().file.find("graph_session_test.cpp"), std::string::npos);
}

TEST(GraphSession, LookupOfAMissingNameSuggestsCloseOnes) {
  Graph g;
  {
    GraphScope scope(g);
    identity(placeholder(float32, {1}, "input"), "output");
  }
  try {
    g.operation("outptu");
    FAIL();
  } catch (const NotFound& e) {
    EXPECT_NE(std::string(e.what()).find("'output'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.tensor("output:3"), NotFound);
  EXPECT_THROW(g.tensor("nothing:0"), NotFound);
}

TEST(GraphSession, OnlyWhatTheFetchesNeedRuns) {
  Graph g;
  {
    GraphScope scope(g);
    Tensor x = placeholder(float32, {}, "x");
    Tensor y = placeholder(float32, {}, "y");
    identity(x * 2.f, "double_x");
    identity(y * 3.f, "triple_y");
  }
  Session sess(g);
  // y is not fed: fine, nothing fetched needs it.
  EXPECT_EQ(sess.run({{"x", constant(4.f)}}, {"double_x"})[0].item<float>(), 8.f);
  try {
    sess.run({{"x", constant(4.f)}}, {"triple_y"});
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'y'"), std::string::npos) << e.what();
  }
}

TEST(GraphSession, FeedingAnyTensorOverridesIt) {
  Graph g;
  Tensor sum;
  {
    GraphScope scope(g);
    Tensor x = placeholder(float32, {}, "x");
    sum = x + 1.f;
    identity(sum * 10.f, "out");
  }
  Session sess(g);
  EXPECT_EQ(sess.run({{sum, constant(5.f)}}, {"out"})[0].item<float>(), 50.f);  // x need not be fed
}

TEST(GraphSession, MistypedOrMisshapenFeedIsNamed) {
  Graph g;
  {
    GraphScope scope(g);
    identity(placeholder(float32, {-1, 3}, "images") * 2.f, "out");
  }
  Session sess(g);
  for (const Tensor& bad : {constant({{1, 2, 3}}), constant({{1.f, 2.f}}), constant({1.f, 2.f, 3.f})}) {
    try {
      sess.run({{"images", bad}}, {"out"});
      FAIL();
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("images"), std::string::npos) << e.what();
    }
  }
}

TEST(GraphSession, VariablesAreInitialisedOnTheFirstRunAndUpdatedByTargets) {
  Graph g;
  Variable counter;
  {
    GraphScope scope(g);
    counter = Variable(random::uniform({}, 5, 5.0001, 3), "counter");
    Tensor bumped = counter.assign_add(constant(1.f));  // the new value: fetching it runs the assignment
    identity(bumped, "bumped");
    identity(counter.value(), "read");  // a plain read: it does not
  }
  EXPECT_THROW(counter.value(), FailedPrecondition);  // not initialised before a Session runs it
  Session sess(g);
  EXPECT_NEAR(sess.run({"read"})[0].item<float>(), 5.f, 1e-3);
  Tensor first = sess.run({"bumped"})[0];
  EXPECT_NEAR(first.item<float>(), 6.f, 1e-3);
  Tensor second = sess.run({"bumped"})[0];
  EXPECT_NEAR(second.item<float>(), 7.f, 1e-3);
  EXPECT_NEAR(sess.run({"read"})[0].item<float>(), 7.f, 1e-3);
  EXPECT_NEAR(counter.value().item<float>(), 7.f, 1e-3);
}

TEST(GraphSession, TargetsRunWithoutFetches) {
  Graph g;
  Variable v(constant(0.f), "v");
  {
    GraphScope scope(g);
    Tensor x = placeholder(float32, {}, "x");
    v.assign_add(x);
  }
  Session sess(g);
  sess.run({{"x", constant(2.f)}}, {}, {"AssignAddVariable"});
  sess.run({{"x", constant(3.f)}}, {}, {"AssignAddVariable"});
  EXPECT_EQ(v.value().item<float>(), 5.f);
}

TEST(GraphSession, PlaceholderOutsideAGraphIsAnError) { EXPECT_THROW(placeholder(float32, {1}, "x"), FailedPrecondition); }

TEST(GraphSession, DotPictureNamesEveryNode) {
  Graph g;
  {
    GraphScope scope(g);
    identity(relu(placeholder(float32, {2}, "x")), "y");
  }
  std::string dot = g.to_dot();
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  for (const char* name : {"x", "Relu", "y"}) EXPECT_NE(dot.find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace weft
