// Learning-rate schedules: CosineDecay against its formula (written out here in float64), its
// tensor form against its double form, optimizers following a schedule eagerly, in a traced step
// (traced once, the rate read from the step count) and in a Session, and bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <optional>

#include "reference.h"
#include "temp_dir.h"
#include "weft/weft.h"

namespace weft {
namespace {

// The API's example: linear from 0 to 1e-3 over 100 steps, cosine down to 1e-4 over the next
// 5000, then flat.
double expected(int64_t step) {
  const double initial = 1e-3, alpha = 0.1;
  if (step < 100) return initial * static_cast<double>(step) / 100;
  const double d = std::min<double>(static_cast<double>(step - 100), 5000);
  return initial * (alpha + (1 - alpha) * (1 + std::cos(std::numbers::pi * d / 5000)) / 2);
}

TEST(CosineDecay, ValuesAtChosenSteps) {
  optim::CosineDecay schedule(1e-3, 5000, 0.1, 100);
  EXPECT_EQ(schedule(0), 0.0) << "warm-up starts at 0";
  EXPECT_NEAR(schedule(1), 1e-5, 1e-18);
  EXPECT_NEAR(schedule(50), 5e-4, 1e-18) << "half way up";
  EXPECT_NEAR(schedule(99), 9.9e-4, 1e-18);
  EXPECT_EQ(schedule(100), 1e-3) << "the peak, exactly";
  EXPECT_NEAR(schedule(2600), 5.5e-4, 1e-17) << "half way down: (1e-3 + 1e-4) / 2";
  EXPECT_NEAR(schedule(5100), 1e-4, 1e-18) << "the floor";
  EXPECT_EQ(schedule(5100), schedule(5101)) << "flat after the decay";
  EXPECT_EQ(schedule(5100), schedule(1000000));
  for (int64_t step = 0; step <= 6000; step += 37) EXPECT_NEAR(schedule(step), expected(step), 1e-17) << step;
  // Monotone: up during warm-up, down during the decay.
  for (int64_t step = 1; step < 100; ++step) EXPECT_GT(schedule(step), schedule(step - 1)) << step;
  for (int64_t step = 101; step <= 5100; ++step) EXPECT_LT(schedule(step), schedule(step - 1)) << step;
}

TEST(CosineDecay, WithoutWarmupOrFloor) {
  optim::CosineDecay schedule(0.5, 10);
  EXPECT_EQ(schedule(0), 0.5);
  EXPECT_NEAR(schedule(5), 0.25, 1e-16);
  EXPECT_NEAR(schedule(10), 0.0, 1e-16);
  EXPECT_NEAR(schedule(20), 0.0, 1e-16);
  EXPECT_EQ(schedule.initial_learning_rate(), 0.5);
  EXPECT_EQ(schedule.decay_steps(), 10);
  EXPECT_EQ(schedule.alpha(), 0.0);
  EXPECT_EQ(schedule.warmup_steps(), 0);
}

// The tensor form (what traced steps run) gives the double form's bits, eagerly and traced.
TEST(CosineDecay, TensorFormEqualsDoubleForm) {
  for (const optim::CosineDecay& schedule :
       {optim::CosineDecay(1e-3, 5000, 0.1, 100), optim::CosineDecay(0.3, 7, 0.0, 0), optim::CosineDecay(2.0, 1, 1.0, 3)}) {
    std::vector<double> steps;
    for (int64_t s = 0; s <= 6000; s += 7) steps.push_back(static_cast<double>(s));
    const std::vector<double> eager = schedule(constant(steps)).to_vector<double>();
    auto traced_fn = function([&](Tensor s) { return schedule(s); });
    const std::vector<double> traced = traced_fn(constant(steps)).to_vector<double>();
    for (size_t i = 0; i < steps.size(); ++i) {
      const double want = schedule(static_cast<int64_t>(steps[i]));
      ASSERT_EQ(eager[i], want) << "step " << steps[i];
      ASSERT_EQ(traced[i], want) << "traced, step " << steps[i];
    }
    // Integer steps are converted.
    EXPECT_EQ(schedule(constant(int64_t{3})).item<double>(), schedule(3));
  }
}

TEST(CosineDecay, BadArgumentsNameWhatIsWrong) {
  auto message = [](auto f) { return ref::error_message<InvalidArgument>(f); };
  EXPECT_TRUE(ref::contains(message([] { optim::CosineDecay(1e-3, 0); }), "decay_steps must be positive, got 0"));
  EXPECT_TRUE(ref::contains(message([] { optim::CosineDecay(1e-3, -5); }), "decay_steps must be positive, got -5"));
  EXPECT_TRUE(ref::contains(message([] { optim::CosineDecay(1e-3, 10, -0.1); }), "alpha"));
  EXPECT_TRUE(ref::contains(message([] { optim::CosineDecay(1e-3, 10, 1.5); }), "alpha"));
  EXPECT_TRUE(ref::contains(message([] { optim::CosineDecay(1e-3, 10, 0.0, -1); }), "warmup_steps must be >= 0"));
  EXPECT_TRUE(ref::contains(message([] { optim::CosineDecay(-1e-3, 10); }), "initial_learning_rate"));
  EXPECT_TRUE(ref::contains(message([] { optim::CosineDecay(std::numeric_limits<double>::quiet_NaN(), 10); }),
                            "initial_learning_rate"));
  optim::CosineDecay schedule(1e-3, 10);
  EXPECT_TRUE(ref::contains(message([&] { schedule(-1); }), "step must be >= 0, got -1"));
  EXPECT_TRUE(ref::contains(message([&] { schedule(constant(true)); }), "bool"));
  EXPECT_TRUE(ref::contains(message([&] { schedule(Tensor()); }), "undefined"));
}

// A schedule of one's own: both forms, as the base class asks.
class Halving final : public optim::LearningRateSchedule {
 private:
  double rate(int64_t step) const override { return std::pow(0.5, static_cast<double>(step)); }
  Tensor rate(const Tensor& step, const SourceLocation& loc) const override { return pow(constant(0.5), step, loc); }
};

// SGD on w with gradient 1 moves w by exactly the rate of each step: the rates can be read back.
std::vector<double> applied_rates(optim::Optimizer opt, int steps, bool traced, int* tracing_count = nullptr) {
  Variable w(constant(0.0), "w");
  auto step = function([&] { opt.apply_gradients({constant(1.0)}, {w}); });
  std::vector<double> rates;
  for (int i = 0; i < steps; ++i) {
    const double before = w.value().item<double>();
    if (traced) step();
    else opt.apply_gradients({constant(1.0)}, {w});
    rates.push_back(before - w.value().item<double>());
  }
  if (tracing_count) *tracing_count = step.tracing_count();
  return rates;
}

TEST(Schedules, OptimizersFollowTheScheduleEagerAndTracedOnOneTrace) {
  optim::CosineDecay cosine(0.1, 8, 0.2, 4);
  for (bool traced : {false, true}) {
    int traces = 0;
    const std::vector<double> rates = applied_rates(optim::SGD(cosine), 15, traced, &traces);
    for (int n = 0; n < 15; ++n)
      EXPECT_NEAR(rates[static_cast<size_t>(n)], cosine(n), 1e-15) << (traced ? "traced" : "eager") << " step " << n;
    EXPECT_EQ(traces, traced ? 1 : 0) << "a schedule never retraces";
    const std::vector<double> halving = applied_rates(optim::SGD(Halving()), 6, traced);
    for (int n = 0; n < 6; ++n) EXPECT_NEAR(halving[static_cast<size_t>(n)], std::pow(0.5, n), 1e-15) << n;
  }
}

TEST(Schedules, AdamAndAdamWWithAScheduleTracedEqualEagerBitForBit) {
  optim::CosineDecay cosine(0.05, 6, 0.1, 3);
  auto make = [&](int which) -> optim::Optimizer {
    if (which == 0) return optim::Adam(cosine);
    if (which == 1) return optim::AdamW(cosine, 0.1);
    return optim::SGD(cosine, 0.9);
  };
  for (int which = 0; which < 3; ++which) {
    Variable we(constant({1.0, -2.0, 0.5}), "we"), wt(constant({1.0, -2.0, 0.5}), "wt");
    optim::Optimizer eager = make(which), traced = make(which);
    auto step = function([&](Tensor g) { traced.apply_gradients({g}, {wt}); });
    for (int n = 0; n < 12; ++n) {
      Tensor g = constant({std::sin(n + 1.0), std::cos(3.0 * n), 0.25 * n});
      eager.apply_gradients({g}, {we});
      step(g);
      ASSERT_EQ(we.value().to_vector<double>(), wt.value().to_vector<double>()) << "optimizer " << which << " step " << n;
    }
    EXPECT_EQ(step.tracing_count(), 1);
    EXPECT_EQ(traced.iterations(), 12);
  }
}

TEST(Schedules, AScheduleInASessionGraph) {
  optim::CosineDecay cosine(0.1, 5, 0.0, 2);
  Variable w(constant(0.0), "w");
  optim::SGD opt(cosine);
  Graph g;
  Operation train;
  {
    GraphScope scope(g);
    train = opt.apply_gradients({constant(1.0)}, {w});
  }
  Session sess(g);
  for (int n = 0; n < 9; ++n) {
    const double before = w.value().item<double>();
    sess.run({}, {}, {train});
    EXPECT_NEAR(before - w.value().item<double>(), cosine(n), 1e-15) << "step " << n;
  }
  EXPECT_EQ(opt.iterations(), 9);
}

TEST(Schedules, TheOptimizerReportsTheRateOfItsNextStep) {
  optim::CosineDecay cosine(0.1, 5, 0.0, 2);
  optim::Adam opt(cosine);
  ASSERT_NE(opt.learning_rate_schedule(), nullptr);
  EXPECT_EQ(optim::Adam(0.1).learning_rate_schedule(), nullptr);
  Variable w(constant(1.0), "w");
  for (int n = 0; n < 4; ++n) {
    EXPECT_EQ(opt.learning_rate(), cosine(n));
    opt.apply_gradients({constant(1.0)}, {w});
  }
  const std::string message = ref::error_message<FailedPrecondition>([&] { opt.set_learning_rate(0.5); });
  EXPECT_TRUE(ref::contains(message, "schedule")) << message;
  // The optimizer keeps its own copy of the schedule.
  std::optional<optim::SGD> sgd;
  {
    optim::CosineDecay gone(0.3, 10);
    sgd.emplace(gone);
  }
  EXPECT_EQ(sgd->learning_rate(), 0.3);
}

// The step count is saved with the optimizer, so a restored run resumes the schedule where it was.
TEST(Schedules, ARestoredOptimizerResumesTheSchedule) {
  testing::TempDir dir("weft_schedule");
  optim::CosineDecay cosine(0.05, 6, 0.1, 2);
  auto grad = [](int n) { return constant({std::sin(n + 0.5), std::cos(2.0 * n)}); };
  Variable wa(constant({1.0, -1.0}), "w");
  optim::AdamW a(cosine, 0.1);
  for (int n = 0; n < 3; ++n) a.apply_gradients({grad(n)}, {wa});
  Checkpoint({{"w", wa}, {"optimizer", a}}).save(dir.file("run.safetensors"));
  for (int n = 3; n < 8; ++n) a.apply_gradients({grad(n)}, {wa});

  Variable wb(constant({0.0, 0.0}), "w");
  optim::AdamW b(cosine, 0.1);
  auto step = function([&](Tensor g) { b.apply_gradients({g}, {wb}); });
  Checkpoint({{"w", wb}, {"optimizer", b}}).restore(dir.file("run.safetensors"));
  EXPECT_EQ(b.iterations(), 3);
  EXPECT_EQ(b.learning_rate(), cosine(3));
  for (int n = 3; n < 8; ++n) step(grad(n));
  EXPECT_EQ(wb.value().to_vector<double>(), wa.value().to_vector<double>());
}

}  // namespace
}  // namespace weft
