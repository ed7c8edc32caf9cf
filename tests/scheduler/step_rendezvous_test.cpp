// StepRendezvous (scheduler/step_rendezvous.h): a step's sends of named transfers are skipped or kept
// for the step's answer; everything else reaches the rendezvous beneath.
#include "scheduler/step_rendezvous.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "runtime/local_rendezvous.h"
#include "runtime/error.h"

namespace weft {
namespace {

const std::string kChief = "/job:worker/replica:0/task:0/device:CPU:0";
const std::string kTask1 = "/job:worker/replica:0/task:1/device:CPU:0";
const std::string kTask2 = "/job:worker/replica:0/task:2/device:CPU:0";

RendezvousKey key(const std::string& dst, const std::string& edge, int64_t step = 3) {
  return {kTask1, 42, dst, edge, step};
}

Tensor floats(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n), 1.5f);
  return Tensor::from_host(float32, {n}, v.data());
}

TEST(StepRendezvous, ATransferIsNamedByItsKeyWithoutTheStep) {
  EXPECT_EQ(transfer_name(key(kChief, "a:0", 3)), transfer_name(key(kChief, "a:0", 9)));
  // One tensor sent to two devices travels on two edges of one name: two transfers.
  EXPECT_NE(transfer_name(key(kChief, "a:0")), transfer_name(key(kTask2, "a:0")));
}

TEST(StepRendezvous, KeepsSmallSendsOfItsReplyEdgesAndPassesTheRestOn) {
  LocalRendezvous base;
  const std::set<std::string, std::less<>> capture = {transfer_name(key(kChief, "a:0"))};
  StepRendezvous step(base, {.capture = &capture});
  step.send(key(kChief, "a:0"), floats(4));
  step.send(key(kTask2, "a:0"), floats(4));  // the same edge to another task: passed on
  step.send(key(kChief, "b:0"), floats(4));  // not a reply edge: passed on
  const std::vector<StepTensor> kept = step.take_captured();
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].key, key(kChief, "a:0"));
  EXPECT_EQ(kept[0].value.to_vector<float>(), std::vector<float>(4, 1.5f));
  EXPECT_TRUE(step.take_captured().empty());
  EXPECT_EQ(base.pending(), 2u);
  EXPECT_EQ(base.recv(key(kTask2, "a:0"), std::chrono::seconds(1)).value.size(), 4);
  EXPECT_EQ(base.recv(key(kChief, "b:0"), std::chrono::seconds(1)).value.size(), 4);
}

TEST(StepRendezvous, ATensorTooBigForAMessageTakesTheRendezvous) {
  LocalRendezvous base;
  const std::set<std::string, std::less<>> capture = {transfer_name(key(kChief, "a:0"))};
  StepRendezvous step(base, {.capture = &capture});
  const int64_t too_many = static_cast<int64_t>(kMaxStepMessageTensorBytes / sizeof(float)) + 1;
  step.send(key(kChief, "a:0"), floats(too_many));
  EXPECT_TRUE(step.take_captured().empty());
  EXPECT_EQ(base.recv(key(kChief, "a:0"), std::chrono::seconds(1)).value.size(), too_many);
  EXPECT_TRUE(fits_step_message(floats(too_many - 1)));
  EXPECT_TRUE(fits_step_message(Tensor()));  // a dead branch's send carries no tensor
}

TEST(StepRendezvous, SkipsSendsWhoseTensorsWentInTheStepsMessage) {
  LocalRendezvous base;
  const std::set<std::string, std::less<>> skip = {transfer_name(key(kChief, "x:0"))};
  StepRendezvous step(base, {.skip = &skip});
  step.send(key(kChief, "x:0"), floats(2));
  EXPECT_EQ(base.pending(), 0u);
  step.send(key(kChief, "y:0"), floats(2));
  EXPECT_EQ(base.pending(), 1u);
  // Recvs, aborts and cleanups are the base's.
  step.cleanup_step(3);
  EXPECT_EQ(base.pending(), 0u);
}

}  // namespace
}  // namespace weft
