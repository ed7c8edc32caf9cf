// The arithmetic of collectives within one process: combining the contributions of a process's
// members in member order (so the bits do not depend on arrival order), and turning a result
// into each member's outputs. Checks what members must agree on (dtypes, shapes, counts) and
// fails with InvalidArgument naming the op, never combining garbage.
#pragma once

#include <memory>
#include <vector>

#include "comm/collective_executor.h"

namespace weft {

struct LocalContribution {
  int member = 0;
  std::vector<Tensor> inputs;
  DType dtype = DType::Float32;  // broadcast, non-root: the declared output
  Shape shape;
};

struct LocalCombination {
  Tensor packed;             // all-reduce: 1-D local sum; broadcast: the value (or the buffer to fill); all-gather: local rows
  bool packed_is_input = false;  // packed shares an input's buffer: never written
  std::vector<Shape> shapes;     // all-reduce: each output's shape
  Shape trailing;                // all-gather: the dims after dim 0
};

// `contributions` are in ascending member order.
LocalCombination combine_local(const CollectiveParams& p, const std::vector<LocalContribution>& contributions);
// A group within this process: the outputs every member gets. `group_size` divides a mean.
std::vector<Tensor> finish_local(const CollectiveParams& p, LocalCombination& c, int64_t group_size);
// The process's part of a cross-process collective (key and done left to the caller).
std::shared_ptr<CrossProcessCollective> make_cross(const CollectiveParams& p, const LocalCombination& c,
                                                   const std::vector<int>& member_ranks,
                                                   const std::vector<LocalContribution>& contributions);
// The outputs every local member gets once the cross-process stage is done.
std::vector<Tensor> finish_cross(const CollectiveParams& p, const LocalCombination& c, CrossProcessCollective& x,
                                 int64_t group_size);

// Elementwise helpers on equal-dtype buffers (float32, float64, int32, int64).
void add_into(Tensor& acc, int64_t offset, const Tensor& x);
void divide_by(Tensor& t, int64_t n);

}  // namespace weft
