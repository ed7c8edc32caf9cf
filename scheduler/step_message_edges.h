// Which transfers of a cluster graph may ride in a step's control messages instead of the
// rendezvous (why, and how they travel: scheduler/step_rendezvous.h). Decided once, on the chief, from
// the partitions before they are shipped:
//   - feed sends: a Send of this process whose input is a feed (a partition's arg) and whose
//     receiver is on another task. The fed value is known before the step starts, so it can go in
//     that task's RunStep (when small enough, decided per step).
//   - reply edges: a Recv of this process from another task from which nothing another task may
//     wait for is reachable (no Send, collective or control flow, through data or control edges).
//     Holding that tensor until the sending task's step is over then delays nothing the other
//     tasks wait for: typically a fetch.
//
//   StepMessageEdges e = step_message_edges(partitions, is_local);
//   remote->register_partitions(remote_parts, e.reply_edges);
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/rendezvous.h"
#include "scheduler/passes/partition.h"

namespace weft {

struct StepMessageEdges {
  struct FeedSend {
    int feed = -1;       // index into the global feeds
    RendezvousKey key;   // step id 0: set per step
    std::string transfer;  // transfer_name(key)
  };
  std::vector<FeedSend> feed_sends;
  std::vector<std::string> reply_edges;  // transfer names (scheduler/step_rendezvous.h)
};

// `is_local(device)`: whether a full device name is one of this process's.
StepMessageEdges step_message_edges(const PartitionResult& p, const std::function<bool(std::string_view)>& is_local);

}  // namespace weft
