// data::Dataset: slicing, batching, shuffling, prefetching, and their errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "weft/weft.h"

namespace weft {
namespace {

// x: (n, 2) with rows {10 i, 10 i + 1}; y: (n,) with i.
std::vector<Tensor> source(int64_t n) {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < n; ++i) {
    x.push_back(10.f * i);
    x.push_back(10.f * i + 1);
    y.push_back(i);
  }
  return {constant(x, Shape{n, 2}), constant(y, Shape{n})};
}

// The y values of every element of one epoch, batch by batch, checking that x agrees with y.
std::vector<int64_t> epoch(const data::Dataset& ds, std::vector<int64_t>* batch_sizes = nullptr) {
  std::vector<int64_t> ids;
  for (const std::vector<Tensor>& el : ds) {
    EXPECT_EQ(el.size(), 2u);
    std::vector<int64_t> y = el[1].to_vector<int64_t>();
    std::vector<float> x = el[0].to_vector<float>();
    EXPECT_EQ(x.size(), 2 * y.size());
    for (size_t i = 0; i < y.size(); ++i) {
      EXPECT_EQ(x[2 * i], 10.f * y[i]);
      EXPECT_EQ(x[2 * i + 1], 10.f * y[i] + 1);
    }
    if (batch_sizes) batch_sizes->push_back(el[1].rank() == 0 ? 0 : el[1].shape()[0]);
    ids.insert(ids.end(), y.begin(), y.end());
  }
  return ids;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(Dataset, FromTensorsSlicesAlongTheFirstDim) {
  auto ds = data::Dataset::from_tensors(source(5));
  EXPECT_EQ(ds.cardinality(), 5);
  int64_t i = 0;
  for (const std::vector<Tensor>& el : ds) {
    EXPECT_EQ(el[0].shape(), (Shape{2}));
    EXPECT_EQ(el[1].shape(), Shape{});
    EXPECT_EQ(el[0].to_vector<float>(), (std::vector<float>{10.f * i, 10.f * i + 1}));
    EXPECT_EQ(el[1].item<int64_t>(), i);
    ++i;
  }
  EXPECT_EQ(i, 5);
  EXPECT_EQ(epoch(ds), iota(5)) << "a second epoch starts over";
  auto images = data::Dataset::from_tensor_slices({random::normal({3, 4, 5}, 0, 1, 1)});
  for (const auto& el : images) EXPECT_EQ(el[0].shape(), (Shape{4, 5}));
}

TEST(Dataset, BatchKeepsOrDropsTheRemainder) {
  auto base = data::Dataset::from_tensors(source(10));
  std::vector<int64_t> sizes;
  auto kept = base.batch(4);
  EXPECT_EQ(kept.cardinality(), 3);
  EXPECT_EQ(epoch(kept, &sizes), iota(10));
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  sizes.clear();
  auto dropped = base.batch(4, /*drop_remainder=*/true);
  EXPECT_EQ(dropped.cardinality(), 2);
  EXPECT_EQ(epoch(dropped, &sizes), iota(8));
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4}));
  sizes.clear();
  EXPECT_EQ(epoch(base.batch(5, true), &sizes), iota(10));
  EXPECT_EQ(sizes, (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(base.batch(20).cardinality(), 1);
  EXPECT_EQ(base.batch(20, true).cardinality(), 0);
  EXPECT_TRUE(epoch(base.batch(20, true)).empty());
  for (const auto& b : base.batch(3)) {
    EXPECT_EQ(b[0].rank(), 2);
    EXPECT_EQ(b[0].shape()[1], 2);
    EXPECT_EQ(b[0].dtype(), float32);
    EXPECT_EQ(b[1].dtype(), int64);
  }
  // Batches of batches.
  auto nested = base.batch(2).batch(2);
  EXPECT_EQ(nested.cardinality(), 3);
  std::vector<Shape> shapes;
  for (const auto& b : nested) shapes.push_back(b[0].shape());
  EXPECT_EQ(shapes, (std::vector<Shape>{{2, 2, 2}, {2, 2, 2}, {1, 2, 2}}));
}

TEST(Dataset, SeededShuffleIsAPermutationDeterministicPerEpoch) {
  auto make = [] { return data::Dataset::from_tensors(source(50)).shuffle(16, /*seed=*/7); };
  auto a = make(), b = make();
  std::vector<int64_t> a1 = epoch(a), a2 = epoch(a), a3 = epoch(a);
  std::vector<int64_t> b1 = epoch(b), b2 = epoch(b);
  EXPECT_EQ(a1, b1);
  EXPECT_EQ(a2, b2);
  EXPECT_NE(a1, a2) << "reshuffled each epoch";
  EXPECT_NE(a2, a3);
  EXPECT_NE(a1, iota(50));
  for (auto* e : {&a1, &a2, &a3}) {
    std::vector<int64_t> sorted = *e;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, iota(50));
  }
  EXPECT_NE(epoch(data::Dataset::from_tensors(source(50)).shuffle(16, 8)), a1) << "another seed, another order";
  EXPECT_EQ(a.cardinality(), 50);
}

TEST(Dataset, ShuffleWithoutReshuffleRepeatsItsOrder) {
  auto seeded = data::Dataset::from_tensors(source(30)).shuffle(30, 3, /*reshuffle_each_iteration=*/false);
  std::vector<int64_t> first = epoch(seeded);
  EXPECT_NE(first, iota(30));
  EXPECT_EQ(epoch(seeded), first);
  auto unseeded = data::Dataset::from_tensors(source(30)).shuffle(30, -1, false);
  std::vector<int64_t> u = epoch(unseeded);
  EXPECT_EQ(epoch(unseeded), u) << "without reshuffling, every epoch has the order of the first";
  auto fresh = data::Dataset::from_tensors(source(30)).shuffle(30);
  EXPECT_NE(epoch(fresh), epoch(fresh));
}

TEST(Dataset, ShuffleBufferBoundsHowFarElementsMove) {
  // With a buffer of 4, the element yielded at position i was read at most at position i + 3.
  auto ds = data::Dataset::from_tensors(source(40)).shuffle(4, 1);
  std::vector<int64_t> order = epoch(ds);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_LE(order[i], static_cast<int64_t>(i) + 3);
  // A buffer of one is the identity.
  EXPECT_EQ(epoch(data::Dataset::from_tensors(source(10)).shuffle(1, 5)), iota(10));
}

TEST(Dataset, ShuffleThenBatch) {
  auto ds = data::Dataset::from_tensors(source(23)).shuffle(23, 2).batch(5);
  std::vector<int64_t> sizes;
  std::vector<int64_t> ids = epoch(ds, &sizes);
  EXPECT_EQ(sizes, (std::vector<int64_t>{5, 5, 5, 5, 3}));
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, iota(23));
}

TEST(Dataset, PrefetchGivesTheSameElements) {
  auto plain = data::Dataset::from_tensors(source(37)).shuffle(10, 4).batch(4);
  auto twin = data::Dataset::from_tensors(source(37)).shuffle(10, 4).batch(4);
  for (int64_t depth : {1, 2, 8}) {
    auto fetched = twin.prefetch(depth);
    std::vector<int64_t> s1, s2;
    EXPECT_EQ(epoch(fetched, &s2), epoch(plain, &s1)) << "depth " << depth;
    EXPECT_EQ(s1, s2);
    EXPECT_EQ(fetched.cardinality(), plain.cardinality());
  }
  // Unbatched elements through prefetch, and prefetch before batch.
  auto base = data::Dataset::from_tensors(source(9));
  EXPECT_EQ(epoch(base.prefetch(3)), iota(9));
  std::vector<int64_t> sizes;
  EXPECT_EQ(epoch(base.prefetch(2).batch(4).prefetch(1), &sizes), iota(9));
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 1}));
}

TEST(Dataset, BreakingOutOfAPrefetchedLoopDoesNotHang) {
  auto ds = data::Dataset::from_tensors(source(200)).shuffle(50, 1).batch(2).prefetch(1).batch(1).prefetch(2);
  auto result = std::make_shared<std::promise<int>>();
  std::future<int> seen_future = result->get_future();
  // Detached, so that a hang fails this test instead of blocking the whole run.
  std::thread([ds, result] {
    int seen = 0;
    for (int rep = 0; rep < 20; ++rep) {
      for (const auto& el : ds) {
        (void)el;
        if (++seen % 3 == 0) break;
      }
      auto it = ds.begin();  // an iterator dropped without reading on
      (void)it;
    }
    result->set_value(seen);
  }).detach();
  ASSERT_EQ(seen_future.wait_for(std::chrono::seconds(30)), std::future_status::ready) << "deadlock on early exit";
  EXPECT_EQ(seen_future.get(), 60);
}

TEST(Dataset, Errors) {
  EXPECT_THROW(data::Dataset::from_tensors({zeros({3, 2}), zeros({4})}), InvalidArgument);
  EXPECT_THROW(data::Dataset::from_tensors({}), InvalidArgument);
  EXPECT_THROW(data::Dataset::from_tensors({constant(1.f)}), InvalidArgument);
  EXPECT_THROW(data::Dataset::from_tensors({zeros({2}), Tensor()}), InvalidArgument);
  auto ds = data::Dataset::from_tensors({zeros({3, 2})});
  EXPECT_THROW(ds.batch(0), InvalidArgument);
  EXPECT_THROW(ds.batch(-2), InvalidArgument);
  EXPECT_THROW(ds.shuffle(0), InvalidArgument);
  EXPECT_THROW(ds.prefetch(0), InvalidArgument);
}

TEST(Dataset, TransformationsReturnNewDatasets) {
  auto base = data::Dataset::from_tensors(source(6));
  auto batched = base.batch(4);
  EXPECT_EQ(base.cardinality(), 6);
  EXPECT_EQ(batched.cardinality(), 2);
  EXPECT_EQ(epoch(base), iota(6));
  EXPECT_EQ(data::Dataset::from_tensors(source(0)).cardinality(), 0);
  EXPECT_TRUE(epoch(data::Dataset::from_tensors(source(0)).batch(3)).empty());
}

}  // namespace
}  // namespace weft
