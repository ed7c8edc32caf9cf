#include "runtime/rendezvous.h"

#include <unistd.h>

#include <charconv>
#include <cstring>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>

#include "runtime/device_name.h"
#include "runtime/error.h"

namespace weft {

uint64_t process_incarnation() {
  static const uint64_t incarnation = [] {
    // random_device alone may be a fixed sequence on some platforms; mixing in the time and the
    // pid still tells two runs apart there.
    std::random_device rd;
    uint64_t r = (uint64_t{rd()} << 32) ^ rd();
    r ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) * 0x9e3779b97f4a7c15ull;
    r ^= static_cast<uint64_t>(getpid()) << 17;
    std::mt19937_64 mix(r);
    uint64_t v = mix();
    return v ? v : 1;
  }();
  return incarnation;
}

namespace {

constexpr char kHex[] = "0123456789abcdef";

// A key may be anything a peer sent: messages quote a bounded prefix of it with control bytes
// escaped, so they stay one readable line (a NUL would even cut what() short).
std::string printable(std::string_view text) {
  constexpr size_t kShown = 200;
  std::string shown;
  for (char c : text.substr(0, kShown)) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || u == '\\') {
      shown += "\\x";
      shown += kHex[u >> 4];
      shown += kHex[u & 0xf];
    } else {
      shown += c;
    }
  }
  if (text.size() > kShown) shown += "...";
  return shown;
}

[[noreturn]] void bad_key(std::string_view text, const std::string& why) {
  throw InvalidArgument("[rendezvous] bad key '" + printable(text) + "': " + why);
}

constexpr size_t kMaxDeviceName = 512;

void check_device(const RendezvousKey& k, const std::string& name, const char* which) {
  if (name.size() > kMaxDeviceName)
    bad_key(k.to_string(), std::string(which) + " device name of " + std::to_string(name.size()) +
                               " bytes, more than " + std::to_string(kMaxDeviceName));
  DeviceSpec spec;
  try {
    spec = DeviceSpec::parse(name);
  } catch (const InvalidArgument& e) {
    bad_key(k.to_string(), std::string(which) + " device: " + printable(e.what()));
  }
  if (!spec.job || !spec.replica || !spec.task || !spec.type || !spec.index)
    bad_key(k.to_string(), std::string(which) + " device '" + printable(name) +
                               "' is not a full device name like /job:localhost/replica:0/task:0/device:CPU:0");
  if (spec.to_string() != name)
    bad_key(k.to_string(), std::string(which) + " device '" + printable(name) + "' is not in canonical form '" +
                               printable(spec.to_string()) + "'");
}

}  // namespace

std::string RendezvousKey::to_string() const {
  std::string s;
  s.reserve(src_device.size() + dst_device.size() + edge_name.size() + 40);
  s += src_device;
  s += ';';
  for (int shift = 60; shift >= 0; shift -= 4) s += kHex[(src_incarnation >> shift) & 0xf];
  s += ';';
  s += dst_device;
  s += ';';
  s += edge_name;
  s += ';';
  s += std::to_string(step_id);
  return s;
}

void RendezvousKey::validate() const {
  check_device(*this, src_device, "source");
  check_device(*this, dst_device, "destination");
  if (edge_name.empty()) bad_key(to_string(), "empty edge name");
  if (edge_name.size() > kMaxEdgeName)
    bad_key(to_string(), "edge name of " + std::to_string(edge_name.size()) + " bytes, more than " +
                             std::to_string(kMaxEdgeName));
  for (char c : edge_name) {
    auto u = static_cast<unsigned char>(c);
    if (c == ';' || u < 0x20 || u == 0x7f) bad_key(to_string(), "edge name holds ';' or a control character");
  }
  if (step_id < 0) bad_key(to_string(), "negative step id");
}

RendezvousKey RendezvousKey::parse(std::string_view text) {
  // Bounded before anything is split: two device names, 16 hex digits, the edge and a step id.
  constexpr size_t kMaxKey = 2 * kMaxDeviceName + 16 + kMaxEdgeName + 20 + 4;
  if (text.size() > kMaxKey) bad_key(text, std::to_string(text.size()) + " bytes is too long for a key");
  std::string_view field[5];
  size_t start = 0;
  for (int i = 0; i < 5; ++i) {
    size_t end = i < 4 ? text.find(';', start) : text.size();
    if (end == std::string_view::npos)
      bad_key(text, "expected 5 fields separated by ';' (src;incarnation;dst;edge;step), found " + std::to_string(i + 1));
    field[i] = text.substr(start, end - start);
    start = end + 1;
  }
  if (field[4].find(';') != std::string_view::npos)
    bad_key(text, "more than 5 fields separated by ';' (an edge name cannot hold ';')");

  RendezvousKey k;
  k.src_device = std::string(field[0]);
  k.dst_device = std::string(field[2]);
  k.edge_name = std::string(field[3]);
  if (field[1].size() != 16) bad_key(text, "incarnation '" + printable(field[1]) + "' is not 16 hex digits");
  for (char c : field[1]) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) bad_key(text, "incarnation '" + printable(field[1]) + "' is not 16 lowercase hex digits");
    k.src_incarnation = (k.src_incarnation << 4) | static_cast<uint64_t>(d);
  }
  std::string_view step = field[4];
  auto [end, ec] = std::from_chars(step.data(), step.data() + step.size(), k.step_id);
  bool digits_only = !step.empty() && step.front() != '-' && (step.size() == 1 || step.front() != '0');
  if (!digits_only || ec != std::errc() || end != step.data() + step.size())
    bad_key(text, "step id '" + printable(step) + "' is not a non-negative decimal integer in canonical form");
  k.validate();
  return k;
}

namespace {

// Every message hashes its key, so the hash reads eight bytes per step; quality matters less than
// speed here (equality decides), but a multiply-fold keeps devices that differ in one digit apart.
inline uint64_t fold(uint64_t a, uint64_t b) {
  unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

uint64_t hash_bytes(std::string_view s, uint64_t h) {
  const char* p = s.data();
  size_t n = s.size();
  h ^= n * 0x9e3779b97f4a7c15ull;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = fold(h ^ w, 0xbf58476d1ce4e5b9ull);
  }
  uint64_t w = 0;
  std::memcpy(&w, p, n);
  return fold(h ^ w, 0x94d049bb133111ebull);
}

}  // namespace

size_t RendezvousKeyHash::operator()(const RendezvousKey& k) const {
  uint64_t h = fold(k.src_incarnation ^ 0x2545f4914f6cdd1dull, 0xd6e8feb86659fd93ull);
  h = fold(h ^ static_cast<uint64_t>(k.step_id), 0xbf58476d1ce4e5b9ull);
  h = hash_bytes(k.edge_name, h);
  h = hash_bytes(k.src_device, h);
  h = hash_bytes(k.dst_device, h);
  return static_cast<size_t>(h);
}

Rendezvous::Received Rendezvous::recv(const RendezvousKey& key, std::chrono::milliseconds timeout) {
  // Shared with the callback, which may run after this function gave up waiting.
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::exception_ptr error;
    Received got;
  };
  auto state = std::make_shared<State>();
  recv_async(key, [state](std::exception_ptr error, Tensor value, bool is_dead) {
    std::lock_guard<std::mutex> lock(state->mu);
    state->done = true;
    state->error = std::move(error);
    state->got = {std::move(value), is_dead};
    state->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(state->mu);
  if (!state->cv.wait_for(lock, timeout, [&] { return state->done; }))
    throw DeadlineExceeded("[rendezvous] no tensor for key " + key.to_string() + " within " +
                           std::to_string(timeout.count()) + " ms");
  if (state->error) std::rethrow_exception(state->error);
  return std::move(state->got);
}

RendezvousKey rendezvous_key_of_checked_attrs(const Attrs& a, int64_t step_id) {
  return {a.get<std::string>("send_device"), static_cast<uint64_t>(a.get<int64_t>("send_device_incarnation")),
          a.get<std::string>("recv_device"), a.get<std::string>("tensor_name"), step_id};
}

RendezvousKey rendezvous_key_of(const Attrs& a, int64_t step_id) {
  RendezvousKey k = rendezvous_key_of_checked_attrs(a, step_id);
  k.validate();
  return k;
}

bool RecvExpectation::admits(DType d, const Shape& s) const {
  if (d != dtype || s.rank() != shape.rank()) return false;
  for (int64_t i = 0; i < shape.rank(); ++i)
    if (shape[i] >= 0 && shape[i] != s[i]) return false;
  return true;
}

std::string RecvExpectation::to_string() const { return std::string(dtype_name(dtype)) + shape.to_string(); }

}  // namespace weft
