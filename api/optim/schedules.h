// Learning-rate schedules: the rate as a function of the step, as Keras' LearningRateSchedule.
// Every optimizer takes one wherever it takes a number:
//
//   optim::CosineDecay schedule(/*initial=*/1e-3, /*decay_steps=*/5000, /*alpha=*/0.1, /*warmup_steps=*/100);
//   schedule(2600);                      // 5.5e-4, a double
//   optim::AdamW opt(schedule, 0.1);
//
// An optimizer's step n (counting from 0, as opt.iterations() before the step says) applies
// schedule(n). A traced step (weft::function, a Session's graph, DataParallel) computes the rate in
// its graph from the optimizer's step-count variable: the rate changes every call while the graph
// is traced once.
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft::optim {

class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;

  // The rate at `step` (InvalidArgument when negative).
  double operator()(int64_t step) const;
  // The same rates computed by ops from `step`, a tensor of step numbers (any real dtype; the
  // result is float64 of its shape). Symbolic while tracing: this is what a traced step runs.
  Tensor operator()(const Tensor& step, const SourceLocation& loc = SourceLocation::current()) const;

 protected:
  // A schedule of one's own implements both; they must agree (an optimizer's eager and traced
  // steps use one each), ideally bit for bit: the same operations in the same order, in float64.
  virtual double rate(int64_t step) const = 0;
  // `step` is float64 here.
  virtual Tensor rate(const Tensor& step, const SourceLocation& loc) const = 0;
};

// Linear warm-up from 0 to `initial_learning_rate` over `warmup_steps` steps, then a half cosine
// from `initial_learning_rate` down to `alpha * initial_learning_rate` over the next
// `decay_steps` steps, then flat at that floor (Keras' CosineDecay with warmup_target =
// initial_learning_rate and a warm-up that starts at 0; SGDR without restarts):
//
//   step < warmup:  initial * (step / warmup)
//   otherwise:      initial * ((1 - alpha) * 0.5 * (1 + cos(pi * d / decay_steps)) + alpha),
//                   d = min(step - warmup, decay_steps)
class CosineDecay final : public LearningRateSchedule {
 public:
  // InvalidArgument unless initial_learning_rate is finite and >= 0, decay_steps > 0, alpha is
  // in [0, 1] and warmup_steps >= 0.
  CosineDecay(double initial_learning_rate, int64_t decay_steps, double alpha = 0.0, int64_t warmup_steps = 0);

  double initial_learning_rate() const { return initial_; }
  int64_t decay_steps() const { return decay_steps_; }
  double alpha() const { return alpha_; }
  int64_t warmup_steps() const { return warmup_steps_; }

 private:
  double rate(int64_t step) const override;
  Tensor rate(const Tensor& step, const SourceLocation& loc) const override;

  double initial_;
  int64_t decay_steps_;
  double alpha_;
  int64_t warmup_steps_;
};

// What every optimizer's learning-rate argument takes: a number, or a schedule (copied; schedules
// are values).
class LearningRate {
 public:
  LearningRate(double value) : value_(value) {}  // NOLINT(google-explicit-constructor): optim::SGD(0.1)
  template <std::derived_from<LearningRateSchedule> S>
  LearningRate(const S& schedule) : schedule_(std::make_shared<const S>(schedule)) {}  // NOLINT: as above
  LearningRate(std::shared_ptr<const LearningRateSchedule> schedule) : schedule_(std::move(schedule)) {}  // NOLINT

  // Null for a number.
  const std::shared_ptr<const LearningRateSchedule>& schedule() const { return schedule_; }
  // The number (meaningless for a schedule).
  double value() const { return value_; }

 private:
  double value_ = 0;
  std::shared_ptr<const LearningRateSchedule> schedule_;
};

}  // namespace weft::optim
