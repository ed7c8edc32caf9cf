// partition: cuts a placed graph into one graph per device.
//
//   place(g, devices);
//   PartitionResult p = partition(g, {.incarnation = my_incarnation});
//   for (const Partition& part : p.partitions) run part.graph on part.device ...
//   // global arg i is arg p.args[i].arg of p.partitions[p.args[i].partition].graph; likewise results
//
// Every data edge between two devices becomes a Send in the producer's graph and a Recv in the
// consumer's: one Recv per (tensor, destination device), read by every consumer there, and one
// Send per Recv. A control edge between devices is carried by a tiny tensor: a Const scalar that
// waits (by a control edge) for the producer is sent, and the consumer waits on its Recv. Send and
// Recv carry the parts of the transfer's rendezvous key but the step (runtime/rendezvous.h:
// rendezvous_key_of); a control edge's tensor name is "^node".
//
// Each partition is a function body of its own: its args are the global args placed on its
// device, its results the global results its nodes produce, in global order; PartitionResult maps
// the global positions onto them. Node names are kept (the inserted nodes get fresh names no node
// of the global graph has), so a tensor name "node:0" finds its node in its device's graph.
// A partition lists the variables its nodes (and their subgraphs) use, and the initializers of
// its nodes; If/While nodes keep their subgraphs whole. O(n + e) plus the map of names.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/graph.h"

namespace weft {

struct PartitionOptions {
  // The incarnation of the process owning each device: a random number per process, so that a
  // restarted task's tensors are told apart. Devices not listed get `incarnation`.
  uint64_t incarnation = 0;
  std::map<std::string, uint64_t, std::less<>> incarnations;
};

struct Partition {
  std::string device;  // full device name, as in the nodes' assigned_device
  GraphIR graph;
};

// A position in one partition's args or results.
struct PartitionSlot {
  int partition = -1;
  int index = -1;
};

struct PartitionResult {
  std::vector<Partition> partitions;    // sorted by device name; only devices with nodes
  std::vector<PartitionSlot> args;      // global args[i] -> (partition, its args index)
  std::vector<PartitionSlot> results;   // global results[i] -> (partition, its results index)
  // Global node id -> (partition, node id there); {-1, -1} for ids with no live node.
  std::vector<PartitionSlot> nodes;
  int num_sends = 0;  // Send nodes inserted (as many as Recv nodes)

  // The partition of a device, or -1.
  int find(std::string_view device) const;
};

// InvalidArgument naming the node if a node has no assigned device (run place first).
PartitionResult partition(const GraphIR& g, const PartitionOptions& options = {});

}  // namespace weft
