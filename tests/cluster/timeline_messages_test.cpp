// The profiler's control messages (cluster/messages.h): TimelineControl and its Reply decode to
// what was sent, and damaged events in a reply are InvalidArgument naming the task.
#include <gtest/gtest.h>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "cluster/messages.h"
#include "runtime/error.h"
#include "runtime/timeline_format.h"

namespace weft {
namespace {

std::vector<capnp::word> words_of(capnp::MessageBuilder& message) {
  const kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  return std::vector<capnp::word>(flat.begin(), flat.end());
}

TEST(TimelineMessages, ARequestDecodesToItsFlagsAndTimes) {
  capnp::MallocMessageBuilder message;
  auto t = message.initRoot<proto::Request>().initTimelineControl();
  t.setId(9);
  t.setEnable(false);
  t.setCollect(true);
  t.setChiefTime(123456);
  const ControlRequest r = decode_request(words_of(message), "the chief");
  EXPECT_EQ(r.kind, ControlRequest::Kind::kTimelineControl);
  EXPECT_EQ(r.handle, 9u);
  EXPECT_FALSE(r.timeline_enable);
  EXPECT_TRUE(r.timeline_collect);
  EXPECT_EQ(r.chief_time_us, 123456);
}

std::vector<capnp::word> reply_with(const std::string& events) {
  capnp::MallocMessageBuilder message;
  auto r = message.initRoot<proto::Reply>();
  r.setKind(proto::Reply::Kind::TIMELINE);
  r.setHandle(9);
  r.setTaskTime(777);
  r.setTimeline(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(events.data()), events.size()));
  return words_of(message);
}

TEST(TimelineMessages, AReplyCarriesTheTasksEventsAndClock) {
  const std::string events =
      timeline::encode_events({{"Recv_1", "recv", "/job:worker/replica:0/task:1/device:CPU:0", 700, 50, {{"op", "Recv"}}}});
  const ControlReply r = decode_reply(reply_with(events), "/job:worker/replica:0/task:1");
  EXPECT_EQ(r.kind, proto::Reply::Kind::TIMELINE);
  EXPECT_EQ(r.handle, 9u);
  EXPECT_EQ(r.task_time_us, 777);
  ASSERT_EQ(r.timeline.size(), 1u);
  EXPECT_EQ(r.timeline[0].name, "Recv_1");
  EXPECT_EQ(r.timeline[0].duration_us, 50);
}

TEST(TimelineMessages, DamagedEventsAreADamagedMessageNamingTheTask) {
  try {
    (void)decode_reply(reply_with(R"([["a","kernel","t",1,-5,[]]])"), "/job:worker/replica:0/task:2");
    ADD_FAILURE() << "accepted a negative duration";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("damaged control message from /job:worker/replica:0/task:2"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace weft
