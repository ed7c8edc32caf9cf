#include "cluster/step_tree.h"

#include <algorithm>
#include <iostream>
#include <string>

#include "runtime/error.h"

namespace weft {

int step_fan_out_from(const char* text) {
  if (text == nullptr || *text == '\0') return kDefaultStepFanOut;
  try {
    size_t used = 0;
    const long value = std::stol(text, &used);
    if (used == std::string(text).size() && value > 0) return static_cast<int>(std::clamp(value, 2L, 1L << 20));
  } catch (const std::exception&) {
  }
  std::cerr << "weft: WEFT_STEP_FANOUT=" << text << " is not a positive whole number; using " << kDefaultStepFanOut
            << "\n";
  return kDefaultStepFanOut;
}

StepTree::StepTree(std::vector<int> ranks, int fan_out) : ranks_(std::move(ranks)), fan_out_(static_cast<size_t>(std::max(fan_out, 2))) {
  std::sort(ranks_.begin(), ranks_.end());
}

std::pair<size_t, size_t> StepTree::child_positions(long pos) const {
  const size_t first = fan_out_ * static_cast<size_t>(pos + 1);
  return {std::min(first, ranks_.size()), std::min(first + fan_out_, ranks_.size())};
}

std::vector<int> StepTree::children(int rank) const {
  long pos = -1;
  if (rank != kChief) {
    auto it = std::lower_bound(ranks_.begin(), ranks_.end(), rank);
    if (it == ranks_.end() || *it != rank) throw InvalidArgument("[cluster] rank " + std::to_string(rank) + " is not in the step's tree");
    pos = it - ranks_.begin();
  }
  const auto [begin, end] = child_positions(pos);
  return {ranks_.begin() + static_cast<long>(begin), ranks_.begin() + static_cast<long>(end)};
}

int StepTree::depth() const {
  // Each level starts at the first child of the previous level's first position.
  int depth = 0;
  for (long first = -1; child_positions(first).first < ranks_.size(); first = static_cast<long>(child_positions(first).first))
    ++depth;
  return depth;
}

ForwardedStep StepTree::forwarded_at(size_t pos, std::map<int, std::vector<StepTensor>>& tensors_of) const {
  ForwardedStep f;
  f.rank = ranks_[pos];
  if (auto it = tensors_of.find(f.rank); it != tensors_of.end()) f.tensors = std::move(it->second);
  const auto [begin, end] = child_positions(static_cast<long>(pos));
  for (size_t c = begin; c < end; ++c) f.subtree.push_back(forwarded_at(c, tensors_of));
  return f;
}

std::vector<ForwardedStep> StepTree::forwarded(std::map<int, std::vector<StepTensor>>& tensors_of) const {
  std::vector<ForwardedStep> out;
  const auto [begin, end] = child_positions(-1);
  for (size_t c = begin; c < end; ++c) out.push_back(forwarded_at(c, tensors_of));
  return out;
}

}  // namespace weft
