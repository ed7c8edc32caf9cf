// The MPI rendezvous's header as untrusted input: a good header decodes to what was encoded, and
// every kind of damage (each field out of range, the wrong length, a bad key) is InvalidArgument
// saying what is wrong, never a crash or a huge allocation.
#include <gtest/gtest.h>

#include <string>

#include "comm/mpi_rendezvous_wire.h"
#include "runtime/error.h"

namespace weft::mpi_wire {
namespace {

WireHeader good() {
  WireHeader h;
  h.key = {"/job:worker/replica:0/task:0/device:CPU:0", 0x1234, "/job:worker/replica:0/task:1/device:CPU:0",
           "MatMul:0", 5};
  h.dtype = DType::Float32;
  h.shape = {2, 3};
  h.total_bytes = 24;
  h.chunk_bytes = 1000;
  h.tag = 7;
  return h;
}

const DecodeLimits kLimits{1 << 16, 1000};

std::string error_of(const std::string& bytes, DecodeLimits limits = kLimits) {
  try {
    decode_header(bytes, limits);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(decoded)";
}

TEST(MpiWire, RoundTrip) {
  WireHeader h = good();
  h.is_dead = true;
  WireHeader got = decode_header(encode_header(h), kLimits);
  EXPECT_EQ(got.key, h.key);
  EXPECT_TRUE(got.is_dead);
  EXPECT_TRUE(got.has_value);
  EXPECT_EQ(got.dtype, h.dtype);
  EXPECT_EQ(got.shape, h.shape);
  EXPECT_EQ(got.total_bytes, 24u);
  EXPECT_EQ(got.chunk_bytes, 1000u);
  EXPECT_EQ(got.tag, 7u);

  WireHeader none = good();
  none.has_value = false;
  none.shape = {};
  none.total_bytes = 0;
  EXPECT_FALSE(decode_header(encode_header(none), kLimits).has_value);
}

TEST(MpiWire, ADeviceTicketRoundTrips) {
  WireHeader h = good();
  h.device = DevicePayloadTicket{std::string(256, 'a'), 41};
  WireHeader got = decode_header(encode_header(h), kLimits);
  ASSERT_TRUE(got.device.has_value());
  EXPECT_EQ(*got.device, *h.device);
  EXPECT_EQ(got.key, h.key);
  EXPECT_FALSE(decode_header(encode_header(good()), kLimits).device.has_value());
}

TEST(MpiWire, ADamagedDeviceTicketIsInvalidArgument) {
  auto expect = [](const WireHeader& h, const std::string& says) {
    const std::string e = error_of(encode_header(h));
    EXPECT_NE(e.find(says), std::string::npos) << "expected \"" << says << "\", got: " << e;
  };
  WireHeader h = good();
  h.device = DevicePayloadTicket{"", 0};
  expect(h, "device link of 0 bytes");
  h.device = DevicePayloadTicket{std::string(kMaxDeviceLinkBytes + 1, 'x'), 0};
  expect(h, "device link of 513 bytes");
  h = good();
  h.has_value = false;
  h.shape = {};
  h.total_bytes = 0;
  h.device = DevicePayloadTicket{"link", 0};
  expect(h, "no bytes cannot travel by the device transport");
  h = good();
  h.device = DevicePayloadTicket{"link", 3};
  const std::string bytes = encode_header(h);
  for (size_t n = encode_header(good()).size(); n < bytes.size(); ++n)
    EXPECT_NE(error_of(bytes.substr(0, n)).find("ends inside its device"), std::string::npos) << n;
}

TEST(MpiWire, ChunkSizesKeepCountsInRange) {
  EXPECT_EQ(chunk_bytes_for(40000, 1000), 1000u);
  EXPECT_EQ(chunk_count(40000, 1000), 40u);
  EXPECT_EQ(chunk_count(40001, 1000), 41u);
  EXPECT_EQ(chunk_count(0, 1000), 0u);
  EXPECT_EQ(chunk_bytes_for(100, size_t{1} << 40), static_cast<uint64_t>(INT32_MAX));
  EXPECT_LE(chunk_count(uint64_t{1} << 40, chunk_bytes_for(uint64_t{1} << 40, 1)), kMaxChunks);
}

TEST(MpiWire, EveryDamageIsInvalidArgument) {
  const std::string bytes = encode_header(good());
  auto expect = [](const std::string& b, const std::string& says) {
    const std::string e = error_of(b);
    EXPECT_NE(e.find(says), std::string::npos) << "expected \"" << says << "\", got: " << e;
  };
  expect("", "ends inside its magic");
  expect("junk", "magic");
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_NE(error_of(bytes.substr(0, n)), "(decoded)") << n;
  expect(bytes + "x", "after its end");
  std::string b = bytes;
  b[4] = 9;
  expect(b, "version 9");
  b = bytes;
  b[5] = 8;
  expect(b, "unknown flags");
  b = bytes;
  b[6] = 9;
  expect(b, "not a known dtype");
  b = bytes;
  b[7] = static_cast<char>(200);
  expect(b, "rank 200");
  b = bytes;
  b[12] = ';';  // the key's first byte
  EXPECT_NE(error_of(b), "(decoded)");
  b = bytes;
  b[8] = static_cast<char>(0xff);  // a key length past the end
  expect(b, "ends inside its key");
  b = bytes;
  DecodeLimits small = kLimits;
  small.max_header_bytes = 20;
  EXPECT_NE(error_of(b, small).find("over the limit"), std::string::npos);

  WireHeader h = good();
  h.shape = {2, -3};
  expect(encode_header(h), "negative dim");
  h = good();
  h.total_bytes = 25;
  expect(encode_header(h), "byte count 25 is not 24");
  h = good();
  h.shape = {int64_t{1} << 40, int64_t{1} << 40};
  expect(encode_header(h), "too many elements");
  h = good();
  h.shape = {int64_t{1} << 62};
  expect(encode_header(h), "too large");
  h = good();
  h.chunk_bytes = 0;
  expect(encode_header(h), "message size 0");
  h = good();
  h.chunk_bytes = uint64_t{1} << 31;
  expect(encode_header(h), "message size");
  h = good();
  h.shape = {1 << 20};
  h.total_bytes = 4 << 20;
  h.chunk_bytes = 1;
  expect(encode_header(h), "more than");
  h = good();
  h.tag = 0;
  expect(encode_header(h), "payload tag 0");
  h = good();
  h.tag = 1001;
  expect(encode_header(h), "payload tag 1001");
  h = good();
  h.has_value = false;
  expect(encode_header(h), "(no tensor)");
}

}  // namespace
}  // namespace weft::mpi_wire
