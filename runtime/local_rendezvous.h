// The rendezvous of one process: Send and Recv kernels on devices of the same process meet in a
// hash map, and the tensor is handed over as is: the receiver gets the sender's buffer, no copy.
// One instance serves every step of a session; keys carry the step id.
//
//   LocalRendezvous rdv;
//   rdv.send(key, t);
//   rdv.recv_async(key, [](std::exception_ptr e, Tensor t, bool is_dead) { ... });  // runs inline
//   rdv.cleanup_step(key.step_id);
//
// The table is split into shards by key hash, each with its own lock, so senders and receivers
// of different edges on many threads rarely wait for each other.
#pragma once

#include <array>
#include <cstdint>
#include <exception>
#include <mutex>
#include <unordered_map>

#include "runtime/rendezvous.h"

namespace weft {

class LocalRendezvous final : public Rendezvous {
 public:
  LocalRendezvous() = default;
  // Fails the recvs still waiting (a rendezvous outlived by its recvs is a bug of its owner, but
  // their callbacks must still run once).
  ~LocalRendezvous() override;
  LocalRendezvous(const LocalRendezvous&) = delete;
  LocalRendezvous& operator=(const LocalRendezvous&) = delete;

  void send(const RendezvousKey& key, Tensor value, bool is_dead = false) override;
  void recv_async(const RendezvousKey& key, DoneCallback done) override;
  // Keeps `expected` beside the waiting recv, for expectation_of.
  void recv_async_expecting(const RendezvousKey& key, const RecvExpectation& expected, DoneCallback done) override;
  void start_abort(std::exception_ptr error) override;
  void abort_step(int64_t step_id, std::exception_ptr error) override;
  void cleanup_step(int64_t step_id) override;

  // Keys with a tensor waiting for its recv or a recv waiting for its tensor.
  size_t pending() const;
  // What the recv waiting for `key` expects, when one waits and said (recv_async_expecting):
  // whether it did, and then `out`.
  bool expectation_of(const RendezvousKey& key, RecvExpectation& out) const;

 private:
  // One key's half of the meeting: whichever of send and recv came first.
  struct Item {
    bool has_value = false;  // else a recv waits in `done`
    bool is_dead = false;
    Tensor value;
    DoneCallback done;
    bool has_expectation = false;  // a waiting recv's RecvExpectation, in `expected`
    RecvExpectation expected;
  };
  // A key with its hash, computed once per message and used both to pick the shard and inside
  // the shard's table.
  struct StoredKey {
    RendezvousKey key;
    size_t hash;
  };
  struct KeyRef {
    const RendezvousKey* key;
    size_t hash;
  };
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(const StoredKey& k) const noexcept { return k.hash; }
    size_t operator()(const KeyRef& k) const noexcept { return k.hash; }
  };
  struct KeyEqual {
    using is_transparent = void;
    bool operator()(const StoredKey& a, const StoredKey& b) const { return a.key == b.key; }
    bool operator()(const KeyRef& a, const StoredKey& b) const { return *a.key == b.key; }
    bool operator()(const StoredKey& a, const KeyRef& b) const { return a.key == *b.key; }
  };
  using Table = std::unordered_map<StoredKey, Item, KeyHash, KeyEqual>;

  // Every shard holds the abort state too, so that a message takes one lock only; aborts take
  // them all.
  struct alignas(64) Shard {
    mutable std::mutex mu;
    std::exception_ptr aborted;
    std::unordered_map<int64_t, std::exception_ptr> aborted_steps;
    Table items;
  };
  static constexpr size_t kShards = 16;

  Shard& shard_of(size_t hash) { return shards_[(hash >> 7) % kShards]; }
  const Shard& shard_of(size_t hash) const { return shards_[(hash >> 7) % kShards]; }
  void recv_with(const RendezvousKey& key, const RecvExpectation* expected, DoneCallback done);
  // The abort error that applies to `step_id` in this shard, or null; call with the shard locked.
  static const std::exception_ptr* abort_error(const Shard& s, int64_t step_id);

  std::array<Shard, kShards> shards_;
};

// The rendezvous every partitioned run of this process uses (step ids keep runs apart).
LocalRendezvous& process_local_rendezvous();

}  // namespace weft
