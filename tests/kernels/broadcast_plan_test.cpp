// BroadcastPlan directly: every (output offset, input offsets) run it hands a kernel must match
// NumPy broadcasting element by element, and dims must merge as its header promises.
#include <gtest/gtest.h>

#include "../api/reference.h"
#include "kernels/cpu/broadcast_plan.h"

namespace weft::cpu {
namespace {

template <int K>
void check_plan(const Shape& out, const std::array<Shape, K>& in) {
  SCOPED_TRACE(testing::Message() << "out " << out.to_string() << " first input " << in[0].to_string());
  std::array<const Shape*, K> ptrs;
  for (int k = 0; k < K; ++k) ptrs[k] = &in[k];
  BroadcastPlan<K> plan(out, ptrs);
  ASSERT_EQ(plan.outer * plan.inner, out.num_elements());
  std::array<std::vector<int64_t>, K> want;
  for (int k = 0; k < K; ++k) want[k] = ref::source_indices(out, in[k]);
  std::vector<int> seen(static_cast<size_t>(out.num_elements()), 0);
  // Rows in two halves, as two threads would get them.
  for (auto [b, e] : {std::pair<int64_t, int64_t>{0, plan.outer / 2}, {plan.outer / 2, plan.outer}}) {
    plan.for_rows(b, e, [&](int64_t o, const std::array<int64_t, K>& off) {
      for (int64_t j = 0; j < plan.inner; ++j) {
        seen[static_cast<size_t>(o + j)]++;
        for (int k = 0; k < K; ++k)
          ASSERT_EQ(off[k] + j * plan.inner_stride[k], want[k][static_cast<size_t>(o + j)]) << "input " << k;
      }
    });
  }
  for (int s : seen) ASSERT_EQ(s, 1);
  for (int k = 0; k < K; ++k) EXPECT_TRUE(plan.inner_stride[k] == 0 || plan.inner_stride[k] == 1);
}

TEST(BroadcastPlan, MatchesNumpyForTwoInputs) {
  for (const auto& [a, b] : ref::binary_cases(false)) {
    Shape out = *ref::broadcast(a, b);
    if (out.num_elements() == 0) continue;  // kernels return before planning
    check_plan<2>(out, {a, b});
  }
}

TEST(BroadcastPlan, MatchesNumpyForThreeInputs) {
  const Shape cases[][3] = {{{5, 1}, {1, 7}, {}}, {{3, 1, 5}, {1, 4, 1}, {3, 4, 5}}, {{2, 3}, {3}, {2, 1}},
                            {{1}, {4, 1}, {1, 5}}, {{}, {}, {}}, {{6, 1, 2}, {1, 1}, {2}}};
  for (const auto& c : cases) {
    Shape out = *ref::broadcast(c[0], *ref::broadcast(c[1], c[2]));
    check_plan<3>(out, {c[0], c[1], c[2]});
  }
}

TEST(BroadcastPlan, MergesDims) {
  Shape m{4, 5}, row{5}, col{4, 1};
  BroadcastPlan<2> rows(m, {&m, &row});
  EXPECT_EQ(rows.outer, 4);
  EXPECT_EQ(rows.inner, 5);
  BroadcastPlan<2> cols(m, {&m, &col});
  EXPECT_EQ(cols.inner, 5);
  EXPECT_EQ(cols.inner_stride[1], 0);
  Shape big{2, 3, 4};
  BroadcastPlan<2> same(big, {&big, &big});
  EXPECT_EQ(same.outer, 1) << "identical shapes collapse into one run";
  EXPECT_EQ(same.inner, 24);
}

}  // namespace
}  // namespace weft::cpu
