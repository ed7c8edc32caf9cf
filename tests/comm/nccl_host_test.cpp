// The host side of the NCCL collectives, on the CPU: the nccl_id attribute (hex round trip, its
// checks on the collective ops, its refusal without CUDA), the issue queue that keeps a
// communicator's collectives in collective_order.h's order, and DataParallel's choice of NCCL.
// The GPU side is tests/gpu/nccl_test.cpp.
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/distribute/replicate.h"
#include "api/weft/weft.h"
#include "comm/nccl/nccl_id.h"
#include "comm/nccl/nccl_issue_queue.h"

namespace weft {
namespace {

const std::string kCpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";

template <class E = InvalidArgument, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error of the expected type)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

NcclIdBytes pattern() {
  NcclIdBytes b;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 37 + 11);  // every nibble value appears
  return b;
}

TEST(NcclId, HexRoundTrip) {
  const NcclIdBytes b = pattern();
  const std::string hex = encode_nccl_id(b);
  ASSERT_EQ(hex.size(), 256u);
  EXPECT_EQ(hex.substr(0, 4), "0b30");  // 11 = 0x0b, 48 = 0x30
  for (char c : hex) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << hex;
  EXPECT_EQ(decode_nccl_id(hex, "op"), b);
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(decode_nccl_id(upper, "op"), b);
  NcclIdBytes zeros{}, ones;
  ones.fill(0xff);
  EXPECT_EQ(encode_nccl_id(zeros), std::string(256, '0'));
  EXPECT_EQ(encode_nccl_id(ones), std::string(256, 'f'));
  EXPECT_EQ(decode_nccl_id(std::string(256, 'F'), "op"), ones);
}

TEST(NcclId, BadIdsAreInvalidArgumentNamingTheOp) {
  const std::string hex = encode_nccl_id(pattern());
  std::string e = error_of([&] { decode_nccl_id(hex.substr(1), "my_op"); });
  EXPECT_TRUE(contains(e, "[my_op] nccl_id must be 256 hex digits")) << e;
  EXPECT_TRUE(contains(e, "got 255 characters")) << e;
  e = error_of([&] { decode_nccl_id(hex + "00", "my_op"); });
  EXPECT_TRUE(contains(e, "got 258 characters")) << e;
  e = error_of([&] { decode_nccl_id("", "my_op"); });
  EXPECT_TRUE(contains(e, "got 0 characters")) << e;
  std::string bad = hex;
  bad[7] = 'g';
  e = error_of([&] { decode_nccl_id(bad, "my_op"); });
  EXPECT_TRUE(contains(e, "[my_op] nccl_id must be hex digits; character 7 is 'g'")) << e;
  bad = hex;
  bad[200] = ' ';
  e = error_of([&] { decode_nccl_id(bad, "my_op"); });
  EXPECT_TRUE(contains(e, "character 200 is ' '")) << e;
}

TEST(NcclId, DtypesNcclHasAreEveryDtypeButBool) {
  for (DType d : {float16, bfloat16, float32, float64, int8, uint8, int32, int64}) EXPECT_TRUE(nccl_dtype_supported(d));
  EXPECT_FALSE(nccl_dtype_supported(bool_));
}

TEST(NcclId, FreshIdsWithNcclAndARefusalWithout) {
  if (!nccl_compiled_in()) {
    const std::string e = error_of<FailedPrecondition>([] { new_nccl_id(); });
    EXPECT_TRUE(contains(e, "built without CUDA")) << e;
    return;
  }
  std::string a, b;
  try {
    a = new_nccl_id();
    b = new_nccl_id();
  } catch (const Unavailable& e) {
    GTEST_SKIP() << "NCCL cannot make an id on this machine (no usable network interface?): " << e.what();
  }
  EXPECT_EQ(a.size(), 256u);
  EXPECT_NO_THROW(decode_nccl_id(a, "op"));
  EXPECT_NE(a, b);  // each group gets its own communicator
}

CollectiveGroup nccl_group(std::string id) { return {.key = 3, .members = {kCpu0}, .nccl_id = std::move(id)}; }

TEST(NcclAttr, TheCollectiveOpsCheckItOrRefuseItWithoutCuda) {
  const float one = 1;
  const Tensor x = Tensor::from_host(float32, {1}, &one);
  const std::string id = encode_nccl_id(pattern());
  if (!nccl_compiled_in()) {
    for (const std::string& e : {error_of([&] { collective::all_reduce(x, nccl_group(id), 0); }),
                                 error_of([&] { collective::broadcast_send(x, nccl_group(id), 0); }),
                                 error_of([&] { collective::all_gather(x, nccl_group(id), 0); })})
      EXPECT_TRUE(contains(e, "has an nccl_id, but weft was built without CUDA")) << e;
    return;
  }
  std::string e = error_of([&] { collective::all_reduce(x, nccl_group(id.substr(2)), 0); });
  EXPECT_TRUE(contains(e, "[collective_all_reduce] nccl_id must be 256 hex digits")) << e;
  e = error_of([&] { collective::broadcast_recv(float32, {1}, nccl_group("xyz" + id.substr(3)), 0, 0); });
  EXPECT_TRUE(contains(e, "[collective_broadcast] nccl_id must be hex digits; character 0 is 'x'")) << e;
  e = error_of([&] { collective::all_gather(x, nccl_group(std::string(256, 'q')), 0); });
  EXPECT_TRUE(contains(e, "[collective_all_gather] nccl_id must be hex digits")) << e;
  // A good id on a CPU member: the host collective runs it (the id matters on GPUs only).
  const Tensor y = collective::all_reduce(x, nccl_group(id), 0);
  EXPECT_EQ(y.data<float>()[0], 1.f);
  // Through NCCL the ops take 16-bit floats and bytes; without an id, the host's four dtypes.
  Graph graph;
  GraphScope scope(graph);
  const Tensor h = placeholder(float16, {2}, "h");
  EXPECT_NO_THROW(collective::all_reduce(h, nccl_group(id), 0));
  e = error_of([&] { collective::all_reduce(h, nccl_group(""), 0); });
  EXPECT_TRUE(contains(e, "float16, bfloat16, int8 and uint8 run through NCCL")) << e;
  const Tensor flags = placeholder(bool_, {2}, "flags");
  e = error_of([&] { collective::all_reduce(flags, nccl_group(id), 0); });
  EXPECT_TRUE(contains(e, "through NCCL takes every dtype but bool")) << e;
}

// ---- the issue queue ----

CollectiveInstanceKey key(int64_t step, int64_t instance, int64_t instances = 3) {
  return {.group_key = 1, .step_id = step, .instance_key = instance, .group_instances = instances};
}

struct Log {
  std::vector<std::string> issued, failed;
  NcclIssueQueue::Issue issue(const std::string& name, bool finished = true) {
    return [this, name, finished] {
      issued.push_back(name);
      return finished;
    };
  }
  NcclIssueQueue::Fail fail(const std::string& name) {
    return [this, name](std::exception_ptr e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        failed.push_back(name + ": " + x.what());
      }
    };
  }
};

TEST(NcclIssueQueue, NothingIsIssuedBeforeTheCommunicatorIsReady) {
  NcclIssueQueue q;
  Log log;
  q.submit(key(0, 0), log.issue("a"), log.fail("a"));
  EXPECT_TRUE(log.issued.empty());
  EXPECT_EQ(q.waiting(), 1u);
  q.open();
  EXPECT_EQ(log.issued, (std::vector<std::string>{"a"}));
  EXPECT_EQ(q.waiting(), 0u);
}

TEST(NcclIssueQueue, ArrivalsOutOfTurnWaitAndGoInStepThenInstanceOrder) {
  NcclIssueQueue q;
  Log log;
  q.open();
  q.submit(key(4, 2), log.issue("4.2"), log.fail("4.2"));
  q.submit(key(4, 1), log.issue("4.1"), log.fail("4.1"));
  EXPECT_TRUE(log.issued.empty());  // instance 0 of step 4 comes first
  q.submit(key(4, 0), log.issue("4.0"), log.fail("4.0"));
  EXPECT_EQ(log.issued, (std::vector<std::string>{"4.0", "4.1", "4.2"}));
  q.submit(key(5, 1), log.issue("5.1"), log.fail("5.1"));
  q.submit(key(5, 0), log.issue("5.0"), log.fail("5.0"));
  EXPECT_EQ(log.issued, (std::vector<std::string>{"4.0", "4.1", "4.2", "5.0", "5.1"}));
  EXPECT_TRUE(log.failed.empty());
}

TEST(NcclIssueQueue, InstancesThatCanNeverBeIssuedAreRefusedAtOnce) {
  NcclIssueQueue q;
  Log log;
  q.open();
  q.submit(key(2, 0), log.issue("2.0"), log.fail("2.0"));
  EXPECT_THROW(q.submit(key(2, 0), log.issue("again"), log.fail("again")), FailedPrecondition);  // issued
  EXPECT_THROW(q.submit(key(1, 0), log.issue("past"), log.fail("past")), FailedPrecondition);   // a past step
  EXPECT_THROW(q.submit(key(2, 5), log.issue("range"), log.fail("range")), InvalidArgument);  // out of range
  q.submit(key(2, 2), log.issue("2.2"), log.fail("2.2"));
  const std::string e =
      error_of<FailedPrecondition>([&] { q.submit(key(2, 2), log.issue("twice"), log.fail("twice")); });
  EXPECT_TRUE(contains(e, "already waiting")) << e;
  EXPECT_EQ(log.issued, (std::vector<std::string>{"2.0"}));
  EXPECT_EQ(q.waiting(), 1u);
}

TEST(NcclIssueQueue, ALaunchInProgressHoldsTheQueueUntilOpened) {
  NcclIssueQueue q;
  Log log;
  q.open();
  q.submit(key(0, 0), log.issue("0", /*finished=*/false), log.fail("0"));
  q.submit(key(0, 1), log.issue("1"), log.fail("1"));
  EXPECT_EQ(log.issued, (std::vector<std::string>{"0"}));  // the communicator is still launching 0
  q.open();
  EXPECT_EQ(log.issued, (std::vector<std::string>{"0", "1"}));
}

TEST(NcclIssueQueue, AnIssueThatThrowsFailsItselfAndTheRestGoOn) {
  NcclIssueQueue q;
  Log log;
  q.submit(key(0, 0), [] () -> bool { throw Unavailable("launch failed"); }, log.fail("0"));
  q.submit(key(0, 1), log.issue("1"), log.fail("1"));
  q.open();
  ASSERT_EQ(log.failed.size(), 1u);
  EXPECT_TRUE(contains(log.failed[0], "0: launch failed")) << log.failed[0];
  EXPECT_EQ(log.issued, (std::vector<std::string>{"1"}));
}

TEST(NcclIssueQueue, FailAll) {
  NcclIssueQueue q;
  Log log;
  q.submit(key(0, 1), log.issue("1"), log.fail("1"));
  q.submit(key(0, 2), log.issue("2"), log.fail("2"));
  q.fail_all(std::make_exception_ptr(Unavailable("aborted")));
  EXPECT_EQ(log.failed, (std::vector<std::string>{"1: aborted", "2: aborted"}));
  // Broken for good: nothing is issued any more.
  q.open();
  const std::string e = error_of<FailedPrecondition>([&] { q.submit(key(0, 0), log.issue("0"), log.fail("0")); });
  EXPECT_TRUE(contains(e, "communicator was aborted")) << e;
  EXPECT_TRUE(log.issued.empty());
}

TEST(NcclSequenceQueue, TransfersGoInSequenceWhateverOrderTheyArriveIn) {
  BasicIssueQueue<SequenceOrder> q;
  Log log;
  q.open();
  q.submit({2}, log.issue("2"), log.fail("2"));
  q.submit({1}, log.issue("1"), log.fail("1"));
  EXPECT_TRUE(log.issued.empty());  // 0 first, as the peer issues its side
  q.submit({0}, log.issue("0"), log.fail("0"));
  EXPECT_EQ(log.issued, (std::vector<std::string>{"0", "1", "2"}));
  const std::string e = error_of<FailedPrecondition>([&] { q.submit({1}, log.issue("again"), log.fail("again")); });
  EXPECT_TRUE(contains(e, "transfer 1 of the link was already issued")) << e;
  q.submit({4}, log.issue("4"), log.fail("4"));
  EXPECT_THROW(q.submit({4}, log.issue("twice"), log.fail("twice")), FailedPrecondition);
  EXPECT_EQ(q.waiting(), 1u);
}

// ---- DataParallel's choice ----

TEST(NcclDataParallel, ReplicasThatAreAllGpusUseNccl) {
  const std::string t0 = "/job:worker/replica:0/task:0", t1 = "/job:worker/replica:0/task:1";
  using distribute::ReplicaLayout;
  EXPECT_EQ(distribute::replicas_use_nccl(ReplicaLayout{.devices = {t0 + "/device:GPU:0", t1 + "/device:GPU:0"}}),
            nccl_compiled_in());
  EXPECT_FALSE(distribute::replicas_use_nccl(ReplicaLayout{.devices = {t0 + "/device:GPU:0"}}));
  // Several GPUs of one task: one communicator per GPU, issued together.
  EXPECT_EQ(distribute::replicas_use_nccl(ReplicaLayout{.devices = {t0 + "/device:GPU:0", t0 + "/device:GPU:1"}}),
            nccl_compiled_in());
  EXPECT_EQ(distribute::replicas_use_nccl(ReplicaLayout{.devices = {t0 + "/device:GPU:0", t0 + "/device:GPU:1",
                                                                    t1 + "/device:GPU:0", t1 + "/device:GPU:1"}}),
            nccl_compiled_in());
  EXPECT_FALSE(distribute::replicas_use_nccl(ReplicaLayout{.devices = {t0 + "/device:CPU:0", t1 + "/device:CPU:0"}}));
  EXPECT_FALSE(distribute::replicas_use_nccl(ReplicaLayout{.devices = {t0 + "/device:GPU:0", t1 + "/device:CPU:0"}}));
  EXPECT_EQ(distribute::nccl_id_for_new_group(ReplicaLayout{.devices = {t0 + "/device:CPU:0", t1 + "/device:CPU:0"}}),
            "");
}

// After a failed step, DataParallel rebuilds its step under fresh ids (the groups' communicators
// may be aborted): each distinct id gets one new id, groups keep their keys, nodes without an id
// are untouched.
TEST(NcclDataParallel, RenewedIdsAreFreshOnePerGroupAndKeepTheKeys) {
  if (!nccl_compiled_in()) GTEST_SKIP() << "built without CUDA (no NCCL)";
  std::string a, b;
  try {
    a = new_nccl_id();
    b = new_nccl_id();
  } catch (const Unavailable& e) {
    GTEST_SKIP() << "NCCL cannot make an id on this machine: " << e.what();
  }
  Graph g;
  {
    GraphScope scope(g);
    const Tensor x = placeholder(float32, {1}, "x");
    CollectiveGroup first{.key = 3, .members = {kCpu0}, .instances = 2, .nccl_id = a};
    CollectiveGroup second{.key = 4, .members = {kCpu0}, .nccl_id = b};
    (void)collective::all_reduce(x, first, 0, 0);
    (void)collective::all_reduce(x * 2.f, first, 0, 1);
    (void)collective::broadcast_send(x, second, 0);
  }
  std::map<std::string, std::vector<int64_t>> keys_by_id;
  auto collect = [&] {
    keys_by_id.clear();
    for (int32_t id = 0; id < g.ir().id_bound(); ++id) {
      if (!g.ir().alive(id)) continue;
      const Node& n = g.ir().node(id);
      if (const AttrValue* v = n.attrs.find("nccl_id"))
        keys_by_id[std::get<std::string>(*v)].push_back(n.attrs.get<int64_t>("group_key"));
    }
  };
  collect();
  ASSERT_EQ(keys_by_id.size(), 2u);
  EXPECT_TRUE(distribute::renew_nccl_ids(g.ir()));
  collect();
  ASSERT_EQ(keys_by_id.size(), 2u) << "one new id per group";
  for (const auto& [id, keys] : keys_by_id) {
    EXPECT_NE(id, a);
    EXPECT_NE(id, b);
    EXPECT_NO_THROW(decode_nccl_id(id, "op"));
    const std::vector<int64_t> kept = keys.size() == 2 ? std::vector<int64_t>{3, 3} : std::vector<int64_t>{4};
    EXPECT_EQ(keys, kept) << "keys are kept";
  }
  Graph plain;
  {
    GraphScope scope(plain);
    (void)(placeholder(float32, {1}, "x") + 1.f);
  }
  EXPECT_FALSE(distribute::renew_nccl_ids(plain.ir()));
  const int64_t k1 = distribute::new_collective_group_key(), k2 = distribute::new_collective_group_key();
  EXPECT_NE(k1, k2);
}

}  // namespace
}  // namespace weft
