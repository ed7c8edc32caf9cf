// The tree a step's messages travel over the tasks a graph touches. The chief sends RunStep to
// at most `fan_out` tasks; each forwards it to at most `fan_out` more, and so on; every task
// answers its parent once its own part and its subtree's have answered (the answers travel
// gathered). So no process sends or receives more than fan_out + 1 step messages per step,
// whatever the task count, and a step reaches every task in about log_fan_out(tasks) hops.
//
//   StepTree tree({1, 2, 3, 4, 5, 6, 7}, 2);
//   tree.children(StepTree::kChief);    // {1, 2}: ranks the chief sends the step to
//   tree.children(1);                   // {3, 4}; tree.children(2) == {5, 6}; tree.children(3) == {7}
//
// The tree is the graph's tasks in rank order, laid out breadth first (a heap: position i's
// children are positions k(i+1) .. k(i+1)+k-1). It only carries the step's start and its
// answers: tensors between tasks go straight from sender to receiver (the MPI rendezvous), and
// aborts go from the chief to every task at once, so a failure is not slowed by the tree.
//
// Holding an answer back until a subtree is done cannot deadlock: the chief's only use of an
// answer's tensors is by nodes that send nothing to another task (scheduler/step_message_edges.h
// chooses them so), so no task's step waits for another task's answer.
#pragma once

#include <map>
#include <vector>

#include "cluster/messages.h"

namespace weft {

// Deeper trees are refused as damaged (a fan-out of 2 reaches 2^24 tasks within 24 levels).
inline constexpr int kMaxStepTreeDepth = 32;
// Up to this many tasks besides the chief, the chief sends every step message itself, as before
// the tree: measured in docs/scale.md, a hop costs more than the chief's extra sends there.
inline constexpr int kDefaultStepFanOut = 8;

// The fan-out WEFT_STEP_FANOUT asks for (`text`, null when unset): kDefaultStepFanOut when unset,
// at least 2 (a chain would be as deep as the tasks are many); a value that is not a whole number
// is reported on stderr and the default used.
int step_fan_out_from(const char* text);

class StepTree {
 public:
  static constexpr int kChief = -1;

  // `ranks`: the tasks a graph touches, the chief not among them.
  StepTree(std::vector<int> ranks, int fan_out);

  // The ranks `rank` (kChief for the chief) sends a step to.
  std::vector<int> children(int rank) const;
  // Hops from the chief to the deepest task (0 without tasks).
  int depth() const;
  // The RunSteps the chief sends, one per child, each holding its subtree; each task's tensors
  // are taken from `tensors_of` (by rank).
  std::vector<ForwardedStep> forwarded(std::map<int, std::vector<StepTensor>>& tensors_of) const;

 private:
  // Positions in ranks_ of the children of position `pos` (-1: the chief).
  std::pair<size_t, size_t> child_positions(long pos) const;
  ForwardedStep forwarded_at(size_t pos, std::map<int, std::vector<StepTensor>>& tensors_of) const;

  std::vector<int> ranks_;
  size_t fan_out_;
};

}  // namespace weft
