// place: assigns every node of a graph to one of a list of candidate devices.
//
//   std::vector<PlacementDevice> devices = {{"/job:localhost/replica:0/task:0/device:CPU:0", DeviceType::CPU},
//                                           {"/job:localhost/replica:0/task:0/device:CPU:1", DeviceType::CPU}};
//   PlacementResult r = place(g, devices);      // fills every node's assigned_device
//   for (const std::string& m : r.notices) std::cerr << m << "\n";   // soft placements
//   std::cerr << placement_summary(g);          // "name (Op) -> device", one line per node
//
// Rules, in order:
//  1. A node's requested device is honoured. A request naming no candidate device, or only devices
//     without a kernel for the node, is moved (soft placement) to a device that matches the rest of
//     the request (same job/task, then same type), else to a CPU, else anywhere with a kernel, with
//     one notice per moved node. A request that does not parse is InvalidArgument naming the node.
//  2. A node runs only on a device type with a kernel for it (view ops, whose kernel is optional,
//     run anywhere); none on any candidate is InvalidArgument. Placeholders, fed by the caller,
//     sit on a CPU: one asked onto a GPU goes to a CPU of the same task without a notice.
//  3. Colocation is a hard constraint: every node naming a variable (its `var` attribute: reads,
//     assignments), every optimizer op updating the buffer a ReadVariableForUpdate hands it, and
//     every If/While whose subgraphs touch the variable share one device. Two different requests
//     inside such a group are InvalidArgument naming both nodes. An If/While is one node: its
//     subgraphs run where it runs.
//  4. The rest is placed by a list scheduler of the earliest-finish-time family (HEFT): nodes are
//     taken by decreasing upward rank (average cost of the longest path to an exit, transfers
//     included), each to the candidate where it would finish first given its inputs' transfers.
//     The schedule is then compared, by the same model, with putting every node free to move on
//     each single device, and the fastest of these wins: a placement is never slower by the model
//     than everything on the fastest device.
// Time and memory are O((n + e) * d + n log n) for n nodes, e edges and d devices.
#pragma once

#include <limits>
#include <span>
#include <string>
#include <vector>

#include "runtime/device_name.h"
#include "runtime/graph.h"

namespace weft {

// A device placement may choose: local ones (from the device list) or those of every task of a
// cluster. Speeds are what the cost model divides by; only their ratios matter.
struct PlacementDevice {
  std::string name;  // full name: "/job:localhost/replica:0/task:0/device:CPU:1"
  DeviceType type = DeviceType::CPU;
  double flops_per_second = 1e11;
  double bytes_per_second = 2e10;      // memory bandwidth, for an op's bytes read and written
  double op_overhead_seconds = 2e-6;   // launching one kernel
};

// Time to move `bytes` between two devices: latency + bytes / bandwidth, by how far apart they are.
struct Link {
  double latency_seconds = 0;
  double bytes_per_second = std::numeric_limits<double>::infinity();
  double seconds(double bytes) const { return latency_seconds + bytes / bytes_per_second; }
};

struct LinkModel {
  Link same_task_host{2e-6, 2e10};    // two CPU devices of one process: a hand-over or memcpy
  Link same_task_device{1e-5, 1.2e10};  // host <-> GPU or GPU <-> GPU in one process (PCIe)
  Link cross_task{5e-5, 1e9};          // between processes (MPI or NCCL over the network)

  // The link between two devices given by full names: free on one device, else within one task
  // (host or device memory) or across tasks.
  Link between(const DeviceSpec& a, const DeviceSpec& b) const;
};

struct PlacementOptions {
  LinkModel links;
  // Off: a request that cannot be honoured is InvalidArgument instead of a notice.
  bool allow_soft_placement = true;
};

struct PlacementResult {
  // One line per soft-placed node: "[place] node 'x' (matmul) created at f.cpp:3 requested
  // '/gpu:0', which ...; placed on /job:localhost/replica:0/task:0/device:CPU:0". The caller
  // prints them (on stderr) or raises them.
  std::vector<std::string> notices;
  double modelled_seconds = 0;       // makespan of the chosen placement, by the cost model
  double list_schedule_seconds = 0;  // makespan of the earliest-finish-time schedule
  double single_device_seconds = 0;  // best makespan with every free node on one device
  bool used_single_device = false;   // whether the single-device placement won
};

// Fills assigned_device of every node of `g` (an assignment already there is replaced). Throws
// InvalidArgument for an empty device list, a device name that is not a full name, or a rule above.
PlacementResult place(GraphIR& g, std::span<const PlacementDevice> devices, const PlacementOptions& options = {});

// "name (Op) -> device\n" for every node in topological order: what
// SessionOptions::log_device_placement prints.
std::string placement_summary(const GraphIR& g);

}  // namespace weft
