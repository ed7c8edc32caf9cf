#include "api/optim/schedules.h"

#include <cmath>
#include <numbers>
#include <string>

#include "api/ops/math.h"
#include "api/ops/trig.h"

namespace weft::optim {

double LearningRateSchedule::operator()(int64_t step) const {
  if (step < 0) throw InvalidArgument("[learning rate schedule] step must be >= 0, got " + std::to_string(step));
  return rate(step);
}

Tensor LearningRateSchedule::operator()(const Tensor& step, const SourceLocation& loc) const {
  if (!step.defined()) throw InvalidArgument("[learning rate schedule] the step tensor is undefined");
  if (step.dtype() == DType::Bool)
    throw InvalidArgument("[learning rate schedule] the step must be a number, got a bool tensor");
  return rate(step.dtype() == DType::Float64 ? step : cast(step, DType::Float64, loc), loc);
}

CosineDecay::CosineDecay(double initial_learning_rate, int64_t decay_steps, double alpha, int64_t warmup_steps)
    : initial_(initial_learning_rate), decay_steps_(decay_steps), alpha_(alpha), warmup_steps_(warmup_steps) {
  if (!std::isfinite(initial_learning_rate) || initial_learning_rate < 0)
    throw InvalidArgument("[CosineDecay] initial_learning_rate must be a finite number >= 0, got " +
                          std::to_string(initial_learning_rate));
  if (decay_steps <= 0)
    throw InvalidArgument("[CosineDecay] decay_steps must be positive, got " + std::to_string(decay_steps));
  if (!(alpha >= 0 && alpha <= 1))
    throw InvalidArgument("[CosineDecay] alpha (the final rate as a fraction of the initial one) must be in [0, 1], got " +
                          std::to_string(alpha));
  if (warmup_steps < 0)
    throw InvalidArgument("[CosineDecay] warmup_steps must be >= 0, got " + std::to_string(warmup_steps));
}

// The two forms below are the same float64 operations in the same order, so an eager step and a
// traced step of an optimizer apply the same rate, bit for bit (Cos is libm's cos on the CPU).

double CosineDecay::rate(int64_t step) const {
  const double s = static_cast<double>(step);
  const double warmup = static_cast<double>(warmup_steps_), decay = static_cast<double>(decay_steps_);
  const double d = std::min(std::max(s - warmup, 0.0), decay);
  const double cosine = 0.5 * (1.0 + std::cos(d * (std::numbers::pi / decay)));
  const double decayed = initial_ * ((1.0 - alpha_) * cosine + alpha_);
  if (s < warmup) return initial_ * (s / warmup);
  return decayed;
}

Tensor CosineDecay::rate(const Tensor& step, const SourceLocation& loc) const {
  const double warmup = static_cast<double>(warmup_steps_), decay = static_cast<double>(decay_steps_);
  Tensor d = minimum(maximum(sub(step, warmup, loc), 0.0, loc), decay, loc);
  Tensor cosine = mul(add(cos(mul(d, std::numbers::pi / decay, loc), loc), 1.0, loc), 0.5, loc);
  Tensor decayed = mul(add(mul(cosine, 1.0 - alpha_, loc), alpha_, loc), initial_, loc);
  if (warmup_steps_ == 0) return decayed;
  return where(less(step, warmup, loc), mul(div(step, warmup, loc), initial_, loc), decayed, loc);
}

}  // namespace weft::optim
