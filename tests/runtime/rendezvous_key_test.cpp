// RendezvousKey: its canonical string, the parser that reads keys from other processes, and the
// process incarnation they carry.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <unordered_set>

#include "runtime/error.h"
#include "runtime/rendezvous.h"

namespace weft {
namespace {

constexpr const char* kCpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";
constexpr const char* kCpu1 = "/job:localhost/replica:0/task:0/device:CPU:1";

RendezvousKey sample() { return {kCpu0, 0x0123456789abcdefull, kCpu1, "MatMul:0", 7}; }

// The parse error's message, "" when it parsed.
std::string parse_error(std::string_view text) {
  try {
    RendezvousKey::parse(text);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(RendezvousKey, ProcessIncarnationIsFixedAndNotZero) {
  uint64_t a = process_incarnation();
  EXPECT_NE(a, 0u);
  EXPECT_EQ(process_incarnation(), a);
}

TEST(RendezvousKey, CanonicalString) {
  EXPECT_EQ(sample().to_string(), std::string(kCpu0) + ";0123456789abcdef;" + kCpu1 + ";MatMul:0;7");
  RendezvousKey k = sample();
  k.src_incarnation = 1;
  k.step_id = 0;
  EXPECT_EQ(k.to_string(), std::string(kCpu0) + ";0000000000000001;" + kCpu1 + ";MatMul:0;0");
}

TEST(RendezvousKey, ParseInvertsToString) {
  std::vector<RendezvousKey> keys = {
      sample(),
      {kCpu1, std::numeric_limits<uint64_t>::max(), kCpu0, "scope/inner/x:12", std::numeric_limits<int64_t>::max()},
      {"/job:worker/replica:3/task:17/device:GPU:5", process_incarnation(), "/job:ps/replica:0/task:2/device:CPU:0",
       "a b:0", 0},
  };
  for (const RendezvousKey& k : keys) {
    SCOPED_TRACE(k.to_string());
    EXPECT_NO_THROW(k.validate());
    RendezvousKey back = RendezvousKey::parse(k.to_string());
    EXPECT_EQ(back, k);
    EXPECT_EQ(back.to_string(), k.to_string());
  }
}

TEST(RendezvousKey, MalformedKeysAreInvalidArguments) {
  const std::string src = kCpu0, dst = kCpu1, inc = "0123456789abcdef";
  auto key = [&](const std::string& s, const std::string& i, const std::string& d, const std::string& e,
                 const std::string& step) { return s + ";" + i + ";" + d + ";" + e + ";" + step; };
  struct Case {
    std::string text;
    std::string says;  // a part of the message
  };
  std::vector<Case> cases = {
      {"", "5 fields"},
      {src + ";" + inc + ";" + dst + ";x:0", "5 fields"},
      {key(src, inc, dst, "x:0", "7") + ";8", "more than 5 fields"},
      {key(src, inc, dst, "a;b", "7"), "more than 5 fields"},
      {key(src, "0123456789abcde", dst, "x:0", "7"), "incarnation"},
      {key(src, "0123456789abcdef0", dst, "x:0", "7"), "incarnation"},
      {key(src, "0123456789ABCDEF", dst, "x:0", "7"), "incarnation"},
      {key(src, "0123456789abcdeg", dst, "x:0", "7"), "incarnation"},
      {key(src, "", dst, "x:0", "7"), "incarnation"},
      {key("/cpu:0", inc, dst, "x:0", "7"), "full device name"},
      {key(src, inc, "/job:localhost/task:0/device:CPU:1", "x:0", "7"), "full device name"},
      {key("/job:localhost/replica:0/task:0/device:cpu:0", inc, dst, "x:0", "7"), "canonical"},
      {key("/job:localhost/replica:00/task:0/device:CPU:0", inc, dst, "x:0", "7"), "canonical"},
      {key("job:localhost/replica:0/task:0/device:CPU:0", inc, dst, "x:0", "7"), "canonical"},
      {key("/job:localhost/replica:0/task:0/device:TPU:0", inc, dst, "x:0", "7"), "source device"},
      {key(src, inc, "/job:localhost/replica:0/task:0/device:CPU:-1", "x:0", "7"), "destination device"},
      {key(src, inc, "", "x:0", "7"), "full device name"},
      {key(src, inc, dst, "", "7"), "empty edge name"},
      {key(src, inc, dst, std::string("x\n0"), "7"), "control character"},
      {key(src, inc, dst, std::string("x\0y", 3), "7"), "control character"},
      {key(src, inc, dst, std::string(kMaxEdgeName + 1, 'e'), "7"), "edge name of"},
      {key(src, inc, dst, "x:0", ""), "step id"},
      {key(src, inc, dst, "x:0", "-1"), "step id"},
      {key(src, inc, dst, "x:0", "+7"), "step id"},
      {key(src, inc, dst, "x:0", "07"), "step id"},
      {key(src, inc, dst, "x:0", "7a"), "step id"},
      {key(src, inc, dst, "x:0", "99999999999999999999"), "step id"},
      {key(src, inc, dst, "x:0", " 7"), "step id"},
      {key("/job:" + std::string(600, 'j') + "/replica:0/task:0/device:CPU:0", inc, dst, "x:0", "7"),
       "source device name of"},
      {std::string(1 << 20, ';'), "too long"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text.substr(0, 120));
    std::string m = parse_error(c.text);
    ASSERT_FALSE(m.empty()) << "parsed";
    EXPECT_EQ(m.rfind("[rendezvous] bad key", 0), 0u) << m;
    EXPECT_NE(m.find(c.says), std::string::npos) << m;
    EXPECT_LT(m.size(), 1000u) << "an untrusted key is quoted only in part";
    for (char ch : m) ASSERT_GE(static_cast<unsigned char>(ch), 0x20) << "control bytes are escaped: " << m;
  }
}

TEST(RendezvousKey, ValidateChecksKeysMadeInProcess) {
  RendezvousKey k = sample();
  k.edge_name = "a;b";
  EXPECT_THROW(k.validate(), InvalidArgument);
  k = sample();
  k.step_id = -1;
  EXPECT_THROW(k.validate(), InvalidArgument);
  k = sample();
  k.dst_device = "/gpu:0";
  EXPECT_THROW(k.validate(), InvalidArgument);
}

TEST(RendezvousKey, HashAndEqualityTellEveryFieldApart) {
  RendezvousKey base = sample();
  std::vector<RendezvousKey> keys(6, base);
  keys[1].src_device = "/job:localhost/replica:0/task:0/device:CPU:2";
  keys[2].src_incarnation += 1;
  keys[3].dst_device = "/job:localhost/replica:0/task:0/device:CPU:3";
  keys[4].edge_name = "MatMul:1";
  keys[5].step_id = 8;
  std::unordered_set<RendezvousKey, RendezvousKeyHash> set(keys.begin(), keys.end());
  EXPECT_EQ(set.size(), keys.size());
  EXPECT_EQ(RendezvousKeyHash()(base), RendezvousKeyHash()(sample()));
  EXPECT_TRUE(set.count(sample()));
}

}  // namespace
}  // namespace weft
