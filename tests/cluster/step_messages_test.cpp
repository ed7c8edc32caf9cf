// Tensors in a step's control messages (cluster/messages.h, scheduler/step_rendezvous.h): RunStep and
// its Reply carry them intact, and a damaged one is InvalidArgument naming the sender.
#include <gtest/gtest.h>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "cluster/messages.h"
#include "cluster/step_tree.h"
#include "runtime/error.h"

namespace weft {
namespace {

const std::string kChief = "/job:worker/replica:0/task:0/device:CPU:0";
const std::string kTask1 = "/job:worker/replica:0/task:1/device:CPU:0";

std::vector<capnp::word> words_of(capnp::MessageBuilder& message) {
  const kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  return std::vector<capnp::word>(flat.begin(), flat.end());
}

StepTensor tensor_of_step(int64_t step) {
  const std::vector<int32_t> v = {1, -2, 3, -4, 5, -6};
  return {{kChief, 9, kTask1, "x:0", step}, Tensor::from_host(int32, {2, 3}, v.data()), false};
}

std::vector<capnp::word> run_step_with(const std::vector<StepTensor>& tensors, int64_t step = 5) {
  capnp::MallocMessageBuilder message;
  auto run = message.initRoot<proto::Request>().initRunStep();
  run.setHandle(2);
  run.setStepId(step);
  auto list = run.initTensors(static_cast<unsigned>(tensors.size()));
  for (size_t i = 0; i < tensors.size(); ++i) write_step_tensor(tensors[i], list[static_cast<unsigned>(i)]);
  return words_of(message);
}

void expect_damaged(const std::vector<capnp::word>& words, const std::string& expected) {
  try {
    (void)decode_request(words, "the chief");
    ADD_FAILURE() << "accepted a damaged step tensor (" << expected << ")";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the chief"), std::string::npos) << what;
    EXPECT_NE(what.find(expected), std::string::npos) << what;
  }
}

TEST(StepMessages, ARunStepCarriesItsTensorsIntact) {
  StepTensor dead{{kChief, 9, kTask1, "cond:0", 5}, Tensor(), true};
  const ControlRequest r = decode_request(run_step_with({tensor_of_step(5), dead}), "the chief");
  EXPECT_EQ(r.kind, ControlRequest::Kind::kRunStep);
  ASSERT_EQ(r.tensors.size(), 2u);
  EXPECT_EQ(r.tensors[0].key, tensor_of_step(5).key);
  EXPECT_EQ(r.tensors[0].value.shape(), (Shape{2, 3}));
  EXPECT_EQ(r.tensors[0].value.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3, -4, 5, -6}));
  EXPECT_FALSE(r.tensors[0].is_dead);
  EXPECT_TRUE(r.tensors[1].is_dead);
  EXPECT_FALSE(r.tensors[1].value.defined());
}

TEST(StepMessages, AReplyCarriesTheTasksSends) {
  capnp::MallocMessageBuilder message;
  auto reply = message.initRoot<proto::Reply>();
  reply.setKind(proto::Reply::Kind::RUN_STEP);
  reply.setStepId(5);
  StepTensor t = tensor_of_step(5);
  std::swap(t.key.src_device, t.key.dst_device);
  write_step_tensor(t, reply.initTensors(1)[0]);
  const ControlReply r = decode_reply(words_of(message), "/job:worker/replica:0/task:1");
  ASSERT_EQ(r.tensors.size(), 1u);
  EXPECT_EQ(r.tensors[0].key.dst_device, kChief);
  EXPECT_EQ(r.tensors[0].value.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3, -4, 5, -6}));
}

TEST(StepMessages, DamagedStepTensorsAreRefusedNamingWhatIsWrong) {
  expect_damaged(run_step_with({tensor_of_step(4)}), "carries a tensor of step 4");

  auto damage = [](const std::function<void(proto::StepTensor::Builder)>& change) {
    capnp::MallocMessageBuilder message;
    auto run = message.initRoot<proto::Request>().initRunStep();
    run.setStepId(5);
    auto t = run.initTensors(1)[0];
    write_step_tensor(tensor_of_step(5), t);
    change(t);
    return words_of(message);
  };
  expect_damaged(damage([](auto t) { t.setKey("not;a key"); }), "key");
  expect_damaged(damage([](auto t) { t.setDtype(200); }), "dtype code 200");
  expect_damaged(damage([](auto t) { t.initShape(2).set(0, -1); }), "dimension -1");
  expect_damaged(damage([](auto t) {
                   auto s = t.initShape(2);
                   s.set(0, 2);
                   s.set(1, 4);
                 }),
                 "24 bytes of data for 8 elements");
  expect_damaged(damage([](auto t) {
                   auto s = t.initShape(2);
                   s.set(0, int64_t{1} << 15);
                   s.set(1, int64_t{1} << 15);
                 }),
                 "larger than a step message carries");
}

TEST(StepMessages, AForwardedRunStepCarriesItsSubtreeAndEachTasksTensors) {
  ForwardedStep to{1, {tensor_of_step(5)}, {{3, {}, {{7, {tensor_of_step(5)}, {}}}}, {4, {}, {}}}};
  capnp::MallocMessageBuilder message;
  write_run_step(2, 5, to, message.initRoot<proto::Request>().initRunStep());
  const ControlRequest r = decode_request(words_of(message), "the chief");
  EXPECT_EQ(r.handle, 2u);
  EXPECT_EQ(r.step_id, 5);
  ASSERT_EQ(r.tensors.size(), 1u);
  ASSERT_EQ(r.subtree.size(), 2u);
  EXPECT_EQ(r.subtree[0].rank, 3);
  EXPECT_EQ(r.subtree[1].rank, 4);
  ASSERT_EQ(r.subtree[0].subtree.size(), 1u);
  EXPECT_EQ(r.subtree[0].subtree[0].rank, 7);
  EXPECT_EQ(r.subtree[0].subtree[0].tensors[0].value.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3, -4, 5, -6}));
}

TEST(StepMessages, AnAnswerUpTheTreeCarriesItsSubtreesAnswers) {
  StepTensor t = tensor_of_step(5);
  std::swap(t.key.src_device, t.key.dst_device);
  const StepAnswer own{-1, nullptr, {t}};
  const std::vector<StepAnswer> gathered = {
      {3, nullptr, {t}},
      {7, std::make_exception_ptr(InvalidArgument("[task /job:worker/replica:0/task:7] index 9 out of range")), {}}};
  capnp::MallocMessageBuilder message;
  write_step_answer(5, own, gathered, message.initRoot<proto::Request>().initStepDone());
  ControlRequest r = decode_request(words_of(message), "/job:worker/replica:0/task:1");
  ASSERT_EQ(r.kind, ControlRequest::Kind::kStepDone);
  EXPECT_EQ(r.step_id, 5);
  const std::vector<StepAnswer> answers = step_answers(1, std::move(r.step_done));
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].rank, 1);
  EXPECT_EQ(answers[0].tensors.size(), 1u);
  EXPECT_EQ(answers[1].rank, 3);
  EXPECT_EQ(answers[1].tensors[0].value.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3, -4, 5, -6}));
  EXPECT_EQ(answers[2].rank, 7);
  try {
    std::rethrow_exception(answers[2].error);
  } catch (const InvalidArgument& e) {
    // Named by the task it happened on, not by the one that carried it.
    EXPECT_EQ(std::string(e.what()), "[task /job:worker/replica:0/task:7] index 9 out of range");
  }
}

TEST(StepMessages, DamagedTreesAreRefusedNamingWhatIsWrong) {
  ForwardedStep negative{1, {}, {{-3, {}, {}}}};
  capnp::MallocMessageBuilder m1;
  write_run_step(2, 5, negative, m1.initRoot<proto::Request>().initRunStep());
  expect_damaged(words_of(m1), "forwarded to rank -3");

  ForwardedStep deep{1, {}, {}};
  ForwardedStep* leaf = &deep;
  for (int level = 0; level < kMaxStepTreeDepth + 2; ++level) {
    leaf->subtree.push_back({level + 2, {}, {}});
    leaf = &leaf->subtree.back();
  }
  capnp::MallocMessageBuilder m2;
  write_run_step(2, 5, deep, m2.initRoot<proto::Request>().initRunStep());
  try {
    (void)decode_request(words_of(m2), "the chief");
    ADD_FAILURE() << "accepted a tree deeper than kMaxStepTreeDepth";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("the chief"), std::string::npos) << e.what();
  }

  capnp::MallocMessageBuilder m3;
  auto reply = m3.initRoot<proto::Request>().initStepDone();
  reply.setKind(proto::Reply::Kind::PING);
  try {
    (void)decode_request(words_of(m3), "the chief");
    ADD_FAILURE() << "accepted a step's answer of another kind";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("another kind"), std::string::npos) << e.what();
  }
}

TEST(StepMessages, ARegisterCarriesItsReplyEdges) {
  capnp::MallocMessageBuilder message;
  auto reg = message.initRoot<proto::Request>().initRegister();
  reg.setHandle(3);
  reg.initPartitions(1).set(0, capnp::Data::Reader(reinterpret_cast<const kj::byte*>("g"), 1));
  auto edges = reg.initReplyEdges(2);
  edges.set(0, "a");
  edges.set(1, "b");
  const ControlRequest r = decode_request(words_of(message), "the chief");
  EXPECT_EQ(r.reply_edges, (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace weft
