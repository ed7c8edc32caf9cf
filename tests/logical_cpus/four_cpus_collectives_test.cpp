// Collectives between the four logical CPUs of one process (WEFT_LOGICAL_CPUS=4, set by ctest):
// a Session graph and a traced function with one member per CPU. Members meet in the process and
// combine in member order, so the bits are those of the member-order sum whichever CPU is late.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "api/weft/weft.h"

namespace weft {
namespace {

std::string cpu_name(int i) { return "/job:localhost/replica:0/task:0/device:CPU:" + std::to_string(i); }

class FourCpusCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* v = std::getenv("WEFT_LOGICAL_CPUS");
    if (!v || std::string(v) != "4") GTEST_SKIP() << "needs WEFT_LOGICAL_CPUS=4 in the environment (ctest sets it)";
  }
};

CollectiveGroup four(int64_t key, int64_t instances = 1) {
  CollectiveGroup g{.key = key, .instances = instances};
  for (int i = 0; i < 4; ++i) g.members.push_back(cpu_name(i));
  return g;
}

// Values whose float sum depends on the order they are added in.
const std::vector<std::vector<float>> kValues = {{1e8f, 1.f}, {1.f, 2.f}, {-1e8f, 3.f}, {1.f, 0.5f}};

std::vector<float> member_order_sum() {
  std::vector<float> acc = kValues[0];
  for (size_t m = 1; m < kValues.size(); ++m)
    for (size_t i = 0; i < acc.size(); ++i) acc[i] += kValues[m][i];
  return acc;
}

// Work that takes a while and adds nothing: makes member `late` arrive last.
Tensor delayed(const Tensor& x, const Tensor& s) {
  Tensor m = ones({32, 32}) * s * 0.01f;
  for (int i = 0; i < 8; ++i) m = tanh(matmul(m, m));
  return x + reduce_sum(m) * 0.f;
}

TEST_F(FourCpusCollectives, SessionAllReduceBroadcastAndAllGatherAreMemberOrderDeterministic) {
  for (int late = 0; late < 4; ++late) {
    Graph g;
    Tensor s;
    std::vector<Tensor> sums, bcast, gathered;
    {
      GraphScope scope(g);
      s = placeholder(float32, {}, "s");
      for (int m = 0; m < 4; ++m) {
        DeviceScope on("/cpu:" + std::to_string(m));
        Tensor x = constant(kValues[static_cast<size_t>(m)], Shape{2}) * s;
        if (m == late) x = delayed(x, s);
        sums.push_back(collective::all_reduce(x, four(1, 3), m, 0));
        if (m == 2) bcast.push_back(collective::broadcast_send(x, four(1, 3), m, 1));
        else bcast.push_back(collective::broadcast_recv(float32, {2}, four(1, 3), m, /*root=*/2, 1));
        gathered.push_back(collective::all_gather(reshape(x, {1, 2}), four(1, 3), m, 2));
      }
    }
    Session sess(g);
    std::vector<TensorRef> fetches;
    for (auto* v : {&sums, &bcast, &gathered})
      for (const Tensor& t : *v) fetches.push_back(t);
    const float one = 1.f;
    const auto out = sess.run({{s, Tensor::from_host(float32, {}, &one)}}, fetches);
    std::vector<float> all;
    for (const auto& v : kValues) all.insert(all.end(), v.begin(), v.end());
    for (int m = 0; m < 4; ++m) {
      EXPECT_EQ(out[static_cast<size_t>(m)].to_vector<float>(), member_order_sum()) << "late " << late << " member " << m;
      EXPECT_EQ(out[static_cast<size_t>(4 + m)].to_vector<float>(), kValues[2]) << "late " << late;
      EXPECT_EQ(out[static_cast<size_t>(8 + m)].shape(), (Shape{4, 2}));
      EXPECT_EQ(out[static_cast<size_t>(8 + m)].to_vector<float>(), all) << "late " << late;
    }
    std::set<std::string> devices;
    for (const auto& [node, device] : sess.placement()) devices.insert(device);
    EXPECT_GE(devices.size(), 4u);
  }
}

TEST_F(FourCpusCollectives, TracedFunctionMeanOverFourCpusManyCalls) {
  auto f = function([](const Tensor& x) {
    std::vector<Tensor> outs;
    for (int m = 0; m < 4; ++m) {
      DeviceScope on("/cpu:" + std::to_string(m));
      outs.push_back(collective::all_reduce(x * static_cast<float>(m + 1), four(2), m, 0, "mean"));
    }
    return (outs[0] + outs[1]) + (outs[2] + outs[3]);
  });
  for (int call = 0; call < 10; ++call) {
    const Tensor x = Tensor::from_host(float32, {2}, std::vector<float>{1.f, static_cast<float>(call)}.data());
    EXPECT_EQ(f(x).to_vector<float>(), (std::vector<float>{10.f, 10.f * static_cast<float>(call)})) << call;
  }
}

}  // namespace
}  // namespace weft
