// The order in which one NCCL communicator's calls are issued: NCCL, like MPI, needs every rank to
// issue a communicator's calls in the same order, while an executor makes them ready in whatever
// order its timing gives. So they are issued in an order every rank computes on its own: for
// collectives comm/collective_order.h's (by step, then instance key), for the point-to-point
// transfers of the NCCL rendezvous a sequence number per link (SequenceOrder below). One that
// arrives before its turn waits HERE, as a stored callback, not as a blocked thread: whoever makes
// the next one issuable issues everything that has become so.
//
//   NcclIssueQueue q;                                      // closed: the communicator is not ready
//   q.submit(key, [&] { return launch(); }, on_error);     // queued (or issued, when open)
//   q.open();                                              // the communicator is ready: issue
//
// An issue callback returns whether its launch is finished. A non-blocking NCCL call may answer
// ncclInProgress: then the communicator takes no other call until it is done, so the queue closes
// itself until open() (the watchdog calls it when ncclCommGetAsyncError says ncclSuccess).
//
// Callbacks run with no lock held, one at a time (never two issues of one queue at once), on the
// thread of submit() or open(). Plain C++ with no CUDA in it: unit-tested on the CPU.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "comm/collective_order.h"

namespace weft {

// Calls numbered 0, 1, 2, ... issued in that order (a link of the NCCL rendezvous numbers its
// transfers as the sender makes them).
struct SequenceNumber {
  uint64_t value = 0;
  bool operator==(const SequenceNumber&) const = default;
  std::string to_string() const { return "transfer " + std::to_string(value); }
};

class SequenceOrder {
 public:
  using Key = SequenceNumber;
  // FailedPrecondition for a number already issued.
  void check(const SequenceNumber& k) const {
    if (k.value < next_)
      throw FailedPrecondition("[nccl] " + k.to_string() + " of the link was already issued (the next is " +
                               std::to_string(next_) + ")");
  }
  bool is_next(const SequenceNumber& k) const { return k.value == next_; }
  void advance(const SequenceNumber&) { ++next_; }

 private:
  uint64_t next_ = 0;
};

// `Order` has Key, check(key) (throws for a key that can never be issued), is_next(key) and
// advance(key); keys have == and to_string().
template <class Order>
class BasicIssueQueue {
 public:
  using Key = typename Order::Key;
  // Returns true when the launch is complete, false while it is still in progress (closes the queue).
  using Issue = std::function<bool()>;
  // Called instead of, or after a throwing, Issue.
  using Fail = std::function<void(std::exception_ptr)>;

  // Queues `issue` for `key` and issues whatever is now in turn. Throws (before queuing anything)
  // the FailedPrecondition / InvalidArgument of CollectiveOrder::check, or FailedPrecondition when
  // the same instance is already waiting or the queue was failed (fail_all).
  void submit(const Key& key, Issue issue, Fail fail) {
    std::unique_lock<std::mutex> lock(mu_);
    if (broken_)
      throw FailedPrecondition("[nccl] " + key.to_string() + ": its NCCL communicator was aborted");
    order_.check(key);
    for (const Item& i : waiting_)
      if (i.key == key) throw FailedPrecondition("[nccl] " + key.to_string() + " is already waiting to be issued");
    waiting_.push_back({key, std::move(issue), std::move(fail)});
    drain(lock);
  }

  // The communicator takes calls (again): issues what is in turn.
  void open() {
    std::unique_lock<std::mutex> lock(mu_);
    open_ = true;
    ++opens_;
    drain(lock);
  }

  // Closes the queue for good and fails everything waiting with `error` (an aborted communicator).
  void fail_all(std::exception_ptr error) {
    std::vector<Item> failed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = false;
      broken_ = true;
      failed.swap(waiting_);
    }
    for (Item& i : failed) i.fail(error);
  }

  size_t waiting() const {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_.size();
  }

 private:
  struct Item {
    Key key;
    Issue issue;
    Fail fail;
  };

  // Issues items in turn while open; one thread at a time (issuing_), the others only queue.
  void drain(std::unique_lock<std::mutex>& lock) {
    if (issuing_) return;
    issuing_ = true;
    while (open_ && !broken_) {
      auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const Item& i) { return order_.is_next(i.key); });
      if (it == waiting_.end()) break;
      Item item = std::move(*it);
      waiting_.erase(it);
      order_.advance(item.key);
      const uint64_t opens_before = opens_;
      lock.unlock();
      bool finished = true;
      try {
        finished = item.issue();
      } catch (...) {
        item.fail(std::current_exception());
      }
      lock.lock();
      // Until open(): the communicator is still launching (unless open() came meanwhile).
      if (!finished && opens_ == opens_before) open_ = false;
    }
    issuing_ = false;
  }

  mutable std::mutex mu_;
  Order order_;
  std::vector<Item> waiting_;
  bool open_ = false;
  bool broken_ = false;
  bool issuing_ = false;
  uint64_t opens_ = 0;
};

using NcclIssueQueue = BasicIssueQueue<CollectiveOrder>;

}  // namespace weft
