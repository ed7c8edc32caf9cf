// Tensors that travel in a step's own control messages instead of through the rendezvous, as
// TensorFlow's RunGraph request carries a worker's feeds and its response the fetches.
//
// Why: in a cluster each rendezvous transfer is a hop through the receiving process's MPI progress
// thread, and on a busy or oversubscribed host waking that thread costs tens of microseconds. A
// step already sends the task one message (RunStep) and gets one back (its Reply); small tensors
// that can ride in them cost nothing more. So:
//   - the chief puts small feeds bound for a task in that task's RunStep; the task delivers them to
//     its rendezvous before its partitions run, so their Recvs complete at once; the chief's own
//     Sends of them are skipped;
//   - a task keeps the small tensors it sends to the chief on "reply edges" (named by
//     transfer_name) and returns them in its step's Reply, where the chief delivers them to its
//     Recvs. Only edges whose chief-side consumers send nothing on (the fetches, typically) are
//     reply edges: a tensor held until the end of the step must not be one that the rest of the
//     step waits for.
// Bigger tensors (above kMaxStepMessageTensorBytes) still go through the rendezvous, where MPI
// reads and writes their buffers in place: copying them into a message would cost more than the
// hop saves.
//
//   StepRendezvous r(base, {.skip = &inlined_feed_edges});              // the chief's step
//   StepRendezvous r(base, {.capture = &graph.reply_edges});           // a task's step
//   Executor::run_together(parts, {.rendezvous = &r, ...});
//   for (StepTensor& t : r.take_captured()) ...                         // into the Reply
#pragma once

#include <cstddef>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/rendezvous.h"

namespace weft {

// The largest tensor a step's message carries.
inline constexpr size_t kMaxStepMessageTensorBytes = size_t{64} << 10;

struct StepTensor {
  RendezvousKey key;
  Tensor value;
  bool is_dead = false;
};

// Whether `value` may ride in a step's message: a host tensor (or none, for a dead branch) of at
// most kMaxStepMessageTensorBytes.
bool fits_step_message(const Tensor& value);

// A transfer's name across steps: its key with step id 0, as text. (An edge name alone is not
// one: a tensor sent to several devices travels on several edges of the same name.)
std::string transfer_name(const RendezvousKey& key);

// A step's view of a rendezvous: everything goes to `base` except the sends named below.
class StepRendezvous final : public Rendezvous {
 public:
  struct Edges {
    // Sends of these transfers (transfer_name) are dropped: their tensors went in the step's
    // message already. Null (not an empty set) when there are none: each send then costs nothing.
    const std::set<std::string, std::less<>>* skip = nullptr;
    // Sends of these transfers whose tensor fits a step message are kept for the step's Reply.
    const std::set<std::string, std::less<>>* capture = nullptr;
  };
  StepRendezvous(Rendezvous& base, Edges edges) : base_(base), edges_(edges) {}

  void send(const RendezvousKey& key, Tensor value, bool is_dead = false) override;
  void recv_async(const RendezvousKey& key, DoneCallback done) override { base_.recv_async(key, std::move(done)); }
  void recv_async_expecting(const RendezvousKey& key, const RecvExpectation& expected, DoneCallback done) override {
    base_.recv_async_expecting(key, expected, std::move(done));
  }
  void start_abort(std::exception_ptr error) override { base_.start_abort(std::move(error)); }
  void abort_step(int64_t step_id, std::exception_ptr error) override { base_.abort_step(step_id, std::move(error)); }
  void cleanup_step(int64_t step_id) override { base_.cleanup_step(step_id); }
  bool takes_device_tensor(const RendezvousKey& key, const Tensor& value) const override {
    return base_.takes_device_tensor(key, value);
  }
  // Small tensors may come in the step's reply instead: no hint for them (a wake-up of the MPI
  // progress engine for each costs the null step more than it saves).
  void expect_transfer(const RendezvousKey& key, uint64_t bytes) override {
    if (bytes > kMaxStepMessageTensorBytes) base_.expect_transfer(key, bytes);
  }

  // The captured sends, in the order they were made; empties the list.
  std::vector<StepTensor> take_captured();

 private:
  Rendezvous& base_;
  Edges edges_;
  std::mutex mu_;  // sends come from the step's kernel threads
  std::vector<StepTensor> captured_;
};

}  // namespace weft
