// The order in which a process issues its cross-process collectives on one communicator.
//
// MPI requires every process of a communicator to start its collectives in the same order, but an
// executor makes a step's collective nodes ready in whatever order its timing gives (a bucket of
// gradients may be ready first on one task and last on another). So the MPI stage issues them in
// an order every process can compute on its own: by step id, then instance key. Instance k of a
// step is issued only after instances 0..k-1 of that step; after the group's `group_instances`
// instances, the next step's instance 0.
//
// One communicator serves every group, so the order must hold across groups too: a step issues
// the instances of ONE cross-process group (a second group in the same step is an error naming
// both). Data parallelism needs one group (every gradient bucket is an instance of it); groups
// meeting only within a process are not ordered at all (they issue no MPI call).
//
//   CollectiveOrder order;
//   order.check(key);                 // FailedPrecondition for an instance that can never be issued
//   if (order.is_next(key)) { issue(key); order.advance(key); }
//
// Steps of a group run one after another (data-parallel steps are sequential): an instance of a
// later step while the cursor's step is incomplete means the rest of that step will never come
// (it failed on this process): check() says so, and the group must be reset.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/error.h"

namespace weft {

struct CollectiveInstanceKey {
  int64_t group_key = 0;
  int64_t step_id = 0;
  int64_t instance_key = 0;
  int64_t group_instances = 1;
  bool operator==(const CollectiveInstanceKey&) const = default;
  std::string to_string() const {
    return "group " + std::to_string(group_key) + " step " + std::to_string(step_id) + " instance " +
           std::to_string(instance_key) + " of " + std::to_string(group_instances);
  }
};

class CollectiveOrder {
 public:
  using Key = CollectiveInstanceKey;
  // Throws FailedPrecondition when `k` can never be issued: its step is before the cursor's, it is
  // an instance already issued, another group owns its step, its group_instances disagrees with
  // the step's, or it starts a new step while the cursor's step is incomplete.
  void check(const CollectiveInstanceKey& k) const {
    if (k.instance_key < 0 || k.instance_key >= k.group_instances)
      throw InvalidArgument("[collective] " + k.to_string() + ": instance_key out of range");
    if (!started_) return;
    if (k.step_id < step_)
      throw FailedPrecondition("[collective] " + k.to_string() + " comes after step " + std::to_string(step_) +
                               " was issued (steps of a group run in order)");
    if (k.step_id > step_) {
      if (next_ != 0 && next_ < group_instances_)
        throw FailedPrecondition("[collective] " + k.to_string() + " starts while step " + std::to_string(step_) +
                                 " of group " + std::to_string(group_key_) + " has issued only " +
                                 std::to_string(next_) + " of its " + std::to_string(group_instances_) +
                                 " instances (that step failed here; reset the collectives)");
      return;
    }
    if (k.group_key != group_key_)
      throw FailedPrecondition("[collective] " + k.to_string() + ": step " + std::to_string(step_) +
                               " already runs cross-process group " + std::to_string(group_key_) +
                               "; one step may run one cross-process group");
    if (k.group_instances != group_instances_)
      throw FailedPrecondition("[collective] " + k.to_string() + ": the group's other instances of this step say " +
                               std::to_string(group_instances_) + " instances");
    if (k.instance_key < next_)
      throw FailedPrecondition("[collective] " + k.to_string() + " was already issued in this step");
  }

  // Whether `k` (which passed check) is the one to issue now.
  bool is_next(const CollectiveInstanceKey& k) const {
    if (!started_) return k.instance_key == 0;
    if (k.step_id > step_) return k.instance_key == 0 && next_ >= group_instances_;
    return k.step_id == step_ && k.group_key == group_key_ && k.instance_key == next_;
  }

  // Records that `k` (for which is_next held) was issued.
  void advance(const CollectiveInstanceKey& k) {
    if (!started_ || k.step_id != step_) {
      started_ = true;
      step_ = k.step_id;
      group_key_ = k.group_key;
      group_instances_ = k.group_instances;
      next_ = 0;
    }
    ++next_;
  }

  // Forgets everything: after a reset every process starts afresh.
  void reset() { *this = CollectiveOrder(); }

 private:
  bool started_ = false;
  int64_t step_ = 0;
  int64_t group_key_ = 0;
  int64_t group_instances_ = 0;
  int64_t next_ = 0;
};

}  // namespace weft
