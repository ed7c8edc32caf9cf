// The step's tree (cluster/step_tree.h): every task reached once, no node with more children than
// the fan-out, depth logarithmic, and each task's tensors in its own RunStep.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>

#include "cluster/step_tree.h"
#include "runtime/error.h"

namespace weft {
namespace {

std::vector<int> ranks_from(int first, int count) {
  std::vector<int> r(static_cast<size_t>(count));
  std::iota(r.begin(), r.end(), first);
  return r;
}

// Walks the tree from the chief: each rank reached once, at most `fan_out` children anywhere.
std::set<int> reached(const StepTree& tree, int rank, int fan_out, int& max_children) {
  std::set<int> out;
  for (int child : tree.children(rank)) {
    EXPECT_TRUE(out.insert(child).second);
    for (int r : reached(tree, child, fan_out, max_children)) EXPECT_TRUE(out.insert(r).second) << r;
  }
  max_children = std::max(max_children, static_cast<int>(tree.children(rank).size()));
  return out;
}

TEST(StepTree, ReachesEveryTaskOnceWithBoundedFanOutAndLogarithmicDepth) {
  for (int fan_out : {2, 3, 8}) {
    for (int tasks : {1, 2, 7, 8, 9, 31, 100, 1000}) {
      const StepTree tree(ranks_from(1, tasks), fan_out);
      int max_children = 0;
      const std::set<int> all = reached(tree, StepTree::kChief, fan_out, max_children);
      const std::vector<int> ranks = ranks_from(1, tasks);
      EXPECT_EQ(all, std::set<int>(ranks.begin(), ranks.end())) << fan_out << " " << tasks;
      EXPECT_LE(max_children, fan_out);
      // A full fan_out-ary tree below the chief: sum of fan_out^level over the levels holds them all.
      const int depth = tree.depth();
      double capacity = 0;
      for (int level = 1; level <= depth - 1; ++level) capacity += std::pow(fan_out, level);
      EXPECT_LT(capacity, tasks) << "deeper than needed: " << fan_out << " " << tasks << " depth " << depth;
      EXPECT_LE(depth, static_cast<int>(std::ceil(std::log(tasks + 1.0) / std::log(fan_out))) + 1);
    }
  }
}

TEST(StepTree, UpToTheFanOutTheChiefSendsToEveryTask) {
  const StepTree tree({5, 3, 9}, kDefaultStepFanOut);
  EXPECT_EQ(tree.children(StepTree::kChief), (std::vector<int>{3, 5, 9}));
  EXPECT_TRUE(tree.children(3).empty());
  EXPECT_EQ(tree.depth(), 1);
  EXPECT_EQ(StepTree({}, 2).depth(), 0);
  EXPECT_TRUE(StepTree({}, 2).children(StepTree::kChief).empty());
}

TEST(StepTree, TheExampleOfItsHeader) {
  const StepTree tree({1, 2, 3, 4, 5, 6, 7}, 2);
  EXPECT_EQ(tree.children(StepTree::kChief), (std::vector<int>{1, 2}));
  EXPECT_EQ(tree.children(1), (std::vector<int>{3, 4}));
  EXPECT_EQ(tree.children(2), (std::vector<int>{5, 6}));
  EXPECT_EQ(tree.children(3), (std::vector<int>{7}));
  EXPECT_EQ(tree.depth(), 3);
  EXPECT_THROW((void)tree.children(8), InvalidArgument);
}

TEST(StepTree, EachTaskGetsItsOwnTensorsInItsForwardedStep) {
  const StepTree tree({1, 2, 3, 4, 5}, 2);
  std::map<int, std::vector<StepTensor>> tensors_of;
  for (int r : {2, 5}) {
    const float v = static_cast<float>(r);
    tensors_of[r].push_back({{"/job:worker/replica:0/task:0/device:CPU:0", 1,
                              "/job:worker/replica:0/task:" + std::to_string(r) + "/device:CPU:0", "x:0", 7},
                             Tensor::from_host(float32, {1}, &v), false});
  }
  const std::vector<ForwardedStep> top = tree.forwarded(tensors_of);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].rank, 1);
  EXPECT_TRUE(top[0].tensors.empty());
  ASSERT_EQ(top[1].rank, 2);
  ASSERT_EQ(top[1].tensors.size(), 1u);
  EXPECT_EQ(top[1].tensors[0].value.item<float>(), 2.f);
  ASSERT_EQ(top[0].subtree.size(), 2u);  // 3 and 4 under 1
  ASSERT_EQ(top[1].subtree.size(), 1u);  // 5 under 2
  EXPECT_EQ(top[1].subtree[0].rank, 5);
  EXPECT_EQ(top[1].subtree[0].tensors[0].value.item<float>(), 5.f);
}

TEST(StepTree, FanOutFromTheEnvironment) {
  EXPECT_EQ(step_fan_out_from(nullptr), kDefaultStepFanOut);
  EXPECT_EQ(step_fan_out_from(""), kDefaultStepFanOut);
  EXPECT_EQ(step_fan_out_from("4"), 4);
  EXPECT_EQ(step_fan_out_from("1"), 2);  // a chain would be as deep as the tasks are many
  testing::internal::CaptureStderr();
  EXPECT_EQ(step_fan_out_from("four"), kDefaultStepFanOut);
  EXPECT_EQ(step_fan_out_from("-3"), kDefaultStepFanOut);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("WEFT_STEP_FANOUT=four"), std::string::npos) << err;
}

}  // namespace
}  // namespace weft
