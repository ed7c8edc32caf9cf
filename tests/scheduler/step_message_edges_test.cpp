// Which transfers of a cluster graph may ride in a step's control messages
// (scheduler/step_message_edges.h): the chief's sends of feeds to other tasks, and its recvs from
// other tasks from which nothing another task waits for is reachable.
#include "scheduler/step_message_edges.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "api/ops/creation.h"
#include "scheduler/step_rendezvous.h"
#include "graph_test_util.h"

namespace weft {
namespace {

using testing::add;
using testing::constant;
using testing::placeholder;

const std::string kChief = "/job:worker/replica:0/task:0/device:CPU:0";
const std::string kTask1 = "/job:worker/replica:0/task:1/device:CPU:0";

bool on_chief(std::string_view device) { return device == kChief; }

// The transfer of `edge` from one device to another, as partition() names it.
std::string transfer(const PartitionResult& p, const std::string& edge, const std::string& from, const std::string& to) {
  for (const Partition& part : p.partitions)
    for (int32_t id : part.graph.node_ids()) {
      const Node& n = part.graph.node(id);
      if (n.type() != "Send") continue;
      const RendezvousKey key = rendezvous_key_of(n.attrs, 0);
      if (key.edge_name == edge && key.src_device == from && key.dst_device == to) return transfer_name(key);
    }
  ADD_FAILURE() << "no transfer of " << edge << " from " << from << " to " << to;
  return "";
}

TEST(StepMessageEdges, FeedsToOtherTasksAndRecvsThatNothingWaitsOn) {
  GraphIR g;
  const int32_t x = placeholder(g, float32, {4}, "x");
  const int32_t k = constant(g, Tensor::from_host(float32, {4}, std::vector<float>{1, 2, 3, 4}.data()), "k");
  const int32_t y = add(g, "Neg", {{x, 0}}, {}, "y");        // task 1: x goes there (a feed send)
  const int32_t ky = add(g, "Add", {{k, 0}, {y, 0}}, {}, "ky");  // task 1: k goes there (not a feed)
  const int32_t fetched = add(g, "Relu", {{ky, 0}}, {}, "fetched");   // chief: ky comes back, then nothing
  const int32_t u = add(g, "Square", {{x, 0}}, {}, "u");      // task 1
  const int32_t v = add(g, "Tanh", {{u, 0}}, {}, "v");        // chief: u comes back ...
  const int32_t w = add(g, "Abs", {{v, 0}}, {}, "w");         // task 1: ... and v goes on to task 1
  g.args = {x};
  g.results = {{fetched, 0}, {w, 0}};
  for (int32_t id : {x, k, fetched, v}) g.node(id).assigned_device = kChief;
  for (int32_t id : {y, ky, u, w}) g.node(id).assigned_device = kTask1;

  const PartitionResult p = partition(g, {.incarnation = 7});
  const StepMessageEdges e = step_message_edges(p, on_chief);
  ASSERT_EQ(e.feed_sends.size(), 1u);
  EXPECT_EQ(e.feed_sends[0].feed, 0);
  EXPECT_EQ(e.feed_sends[0].key.edge_name, "x:0");
  EXPECT_EQ(e.feed_sends[0].key.dst_device, kTask1);
  EXPECT_EQ(e.feed_sends[0].key.step_id, 0);
  // ky's recv leads only to a fetch; u's leads to v, which is sent back to task 1: were u held
  // until task 1's step ended, task 1 would wait for v forever.
  EXPECT_EQ(e.reply_edges, (std::vector<std::string>{transfer(p, "ky:0", kTask1, kChief)}));
}

TEST(StepMessageEdges, ARecvFeedingAControlEdgeToASendIsNotAReplyEdge) {
  GraphIR g;
  const int32_t x = placeholder(g, float32, {2}, "x");
  const int32_t a = add(g, "Neg", {{x, 0}}, {}, "a");     // task 1
  const int32_t b = add(g, "Relu", {{a, 0}}, {}, "b");    // chief
  const int32_t c = add(g, "Abs", {{x, 0}}, {}, "c");     // chief, then sent to task 1 ...
  g.add_control_input(c, b);                               // ... only after b (a's recv)
  const int32_t d = add(g, "Square", {{c, 0}}, {}, "d");  // task 1
  g.args = {x};
  g.results = {{b, 0}, {d, 0}};
  for (int32_t id : {x, b, c}) g.node(id).assigned_device = kChief;
  for (int32_t id : {a, d}) g.node(id).assigned_device = kTask1;
  const StepMessageEdges e = step_message_edges(partition(g, {.incarnation = 7}), on_chief);
  EXPECT_TRUE(e.reply_edges.empty());
  EXPECT_EQ(e.feed_sends.size(), 1u);  // x to task 1; c is not a feed
}

TEST(StepMessageEdges, NothingWithoutOtherTasks) {
  GraphIR g;
  const int32_t x = placeholder(g, float32, {2}, "x");
  const int32_t y = add(g, "Neg", {{x, 0}}, {}, "y");
  g.args = {x};
  g.results = {{y, 0}};
  g.node(x).assigned_device = kChief;
  g.node(y).assigned_device = "/job:worker/replica:0/task:0/device:CPU:1";
  const StepMessageEdges e =
      step_message_edges(partition(g, {.incarnation = 7}), [](std::string_view d) { return d.find("task:0") != d.npos; });
  EXPECT_TRUE(e.feed_sends.empty());
  EXPECT_TRUE(e.reply_edges.empty());
}

}  // namespace
}  // namespace weft
