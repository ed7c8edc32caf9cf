// Executors run together as one step (Executor::run_together): Send and Recv meet in a
// rendezvous, a Recv holds no thread while it waits, and every way a step can go wrong ends in an
// error instead of a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "api/dispatch.h"
#include "api/ops/array.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "runtime/local_rendezvous.h"
#include "graph_test_util.h"
#include "kernels/register_all.h"
#include "runtime/cancellation.h"
#include "runtime/kernel_registry.h"
#include "runtime/op_registry.h"
#include "runtime/rendezvous.h"
#include "scheduler/executor.h"

namespace weft {
namespace {

using testing::add;
using testing::constant;
using testing::placeholder;

const std::string kSrc = local_device_name(DeviceType::CPU, 0);
const std::string kDst = local_device_name(DeviceType::CPU, 1);

Attrs transfer(const std::string& tensor) {
  return {{"send_device", kSrc}, {"send_device_incarnation", int64_t{42}}, {"recv_device", kDst}, {"tensor_name", tensor}};
}

Attrs recv_attrs(const std::string& tensor, Shape shape, DType dtype = float32) {
  Attrs a = transfer(tensor);
  a.set("dtype", dtype);
  a.set("shape", std::move(shape));
  return a;
}

// Producer: y = neg(x) sent as "y:0". Consumer: relu(recv("y:0")) + 1.
struct TwoParts {
  std::unique_ptr<Executor> producer, consumer;
};

TwoParts two_parts(const std::string& sent_name = "y:0", const std::string& received_name = "y:0") {
  auto p = std::make_shared<GraphIR>();
  const int32_t x = placeholder(*p, float32, {3}, "x");
  const int32_t y = add(*p, "Neg", {{x, 0}}, {}, "y");
  const int32_t send = add(*p, "Send", {{y, 0}}, transfer(sent_name), "send_y");
  auto c = std::make_shared<GraphIR>();
  const int32_t recv = add(*c, "Recv", {}, recv_attrs(received_name, {3}), "recv_y");
  const int32_t r = add(*c, "Relu", {{recv, 0}});
  const int32_t one = constant(*c, weft::constant({1.f, 1.f, 1.f}));
  const int32_t out = add(*c, "Add", {{r, 0}, {one, 0}}, {}, "out");
  TwoParts t;
  t.producer = std::make_unique<Executor>(p, ExecutorSpec{.feeds = {{x, 0}}, .targets = {send}});
  t.consumer = std::make_unique<Executor>(c, ExecutorSpec{.fetches = {{out, 0}}});
  return t;
}

TEST(ExecutorStep, SendAndRecvMeetWhicheverPartRunsFirst) {
  TwoParts t = two_parts();
  LocalRendezvous rdv;
  const Tensor x = weft::constant({1.f, -2.f, 3.f});
  for (int order = 0; order < 2; ++order) {
    std::vector<Tensor> pf, cf;
    std::vector<Executor::Part> parts = {{t.producer.get(), {&x, 1}, &pf}, {t.consumer.get(), {}, &cf}};
    if (order) std::swap(parts[0], parts[1]);
    Executor::run_together(parts, {.step_id = 10 + order, .rendezvous = &rdv});
    ASSERT_EQ(cf.size(), 1u);
    EXPECT_EQ(cf[0].to_vector<float>(), (std::vector<float>{1.f, 3.f, 1.f}));
    rdv.cleanup_step(10 + order);
  }
  EXPECT_EQ(rdv.pending(), 0u);
}

TEST(ExecutorStep, ARecvNobodySendsToFailsNamingItInsteadOfHanging) {
  TwoParts t = two_parts("y:0", "z:0");  // the consumer waits for a tensor nobody sends
  LocalRendezvous rdv;
  const Tensor x = weft::constant({1.f, -2.f, 3.f});
  std::vector<Tensor> pf, cf;
  const std::vector<Executor::Part> parts = {{t.producer.get(), {&x, 1}, &pf}, {t.consumer.get(), {}, &cf}};
  try {
    Executor::run_together(parts, {.step_id = 3, .rendezvous = &rdv});
    ADD_FAILURE() << "the step cannot finish";
  } catch (const Internal& e) {
    EXPECT_NE(std::string(e.what()).find("cannot finish"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("recv_y"), std::string::npos) << e.what();
  }
  rdv.cleanup_step(3);
  EXPECT_EQ(rdv.pending(), 0u);
}

TEST(ExecutorStep, AKernelErrorCancelsTheWaitingPartAndTheExecutorsStayUsable) {
  // Producer: gather(table, idx) sent; a bad index fails it while the consumer waits.
  auto p = std::make_shared<GraphIR>();
  const int32_t table = constant(*p, weft::constant({1.f, 2.f, 3.f}));
  const int32_t idx = placeholder(*p, int32, {3}, "idx");
  const int32_t rows = add(*p, "GatherV2", {{table, 0}, {idx, 0}}, {{"axis", int64_t{0}}}, "rows");
  const int32_t send = add(*p, "Send", {{rows, 0}}, transfer("rows:0"), "send_rows");
  auto c = std::make_shared<GraphIR>();
  const int32_t recv = add(*c, "Recv", {}, recv_attrs("rows:0", {3}), "recv_rows");
  const int32_t out = add(*c, "Neg", {{recv, 0}}, {}, "out");
  Executor producer(p, {.feeds = {{idx, 0}}, .targets = {send}});
  Executor consumer(c, {.fetches = {{out, 0}}});
  LocalRendezvous rdv;
  const std::vector<int32_t> good_i = {2, 0, 1}, bad_i = {2, 7, 1};
  const Tensor good = Tensor::from_host(int32, {3}, good_i.data());
  const Tensor bad = Tensor::from_host(int32, {3}, bad_i.data());
  for (int step = 1; step <= 6; ++step) {
    const bool fails = step % 2 == 0;
    std::vector<Tensor> pf, cf;
    // The consumer first: its Recv is waiting when the producer fails.
    const std::vector<Executor::Part> parts = {{&consumer, {}, &cf}, {&producer, {fails ? &bad : &good, 1}, &pf}};
    if (fails) {
      try {
        Executor::run_together(parts, {.step_id = step, .rendezvous = &rdv});
        ADD_FAILURE() << "index 7 is out of range";
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find("node 'rows'"), std::string::npos) << e.what();
      }
    } else {
      Executor::run_together(parts, {.step_id = step, .rendezvous = &rdv});
      EXPECT_EQ(cf[0].to_vector<float>(), (std::vector<float>{-3.f, -1.f, -2.f}));
    }
    rdv.cleanup_step(step);
  }
  EXPECT_EQ(rdv.pending(), 0u);
}

TEST(ExecutorStep, CancellingFromOutsideStopsAStepWaitingForAnotherProcess) {
  TwoParts t = two_parts();
  LocalRendezvous rdv;
  CancellationManager cm;
  std::vector<Tensor> cf;
  const std::vector<Executor::Part> parts = {{t.consumer.get(), {}, &cf}};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cm.cancel(std::make_exception_ptr(Unavailable("[test] task 1 was lost")));
  });
  try {
    // The sender would be in another process: the executor must wait, cancellably.
    Executor::run_together(parts, {.step_id = 1, .rendezvous = &rdv, .cancellation = &cm, .senders_in_process = false});
    ADD_FAILURE() << "the step was cancelled";
  } catch (const Unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("task 1 was lost"), std::string::npos) << e.what();
  }
  canceller.join();
  rdv.cleanup_step(1);
}

TEST(ExecutorStep, AReceivedTensorOfTheWrongShapeIsAnErrorNamingTheRecv) {
  auto c = std::make_shared<GraphIR>();
  const int32_t recv = add(*c, "Recv", {}, recv_attrs("y:0", {3}), "recv_y");
  Executor consumer(c, {.fetches = {{recv, 0}}});
  LocalRendezvous rdv;
  rdv.send(rendezvous_key_of(transfer("y:0"), 5), weft::constant({1.f, 2.f}));
  std::vector<Tensor> cf;
  const std::vector<Executor::Part> parts = {{&consumer, {}, &cf}};
  try {
    Executor::run_together(parts, {.step_id = 5, .rendezvous = &rdv});
    ADD_FAILURE() << "a float32(2,) tensor arrived for float32(3,)";
  } catch (const InvalidArgument& e) {
    // The Recv kernel checks what came against its node (kernels/cpu/transfer.cpp).
    EXPECT_NE(std::string(e.what()).find("recv_y"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("brought float32(2,), where the Recv expects float32(3,)"), std::string::npos)
        << e.what();
  }
  rdv.cleanup_step(5);
}

TEST(ExecutorStep, SendAndRecvOutsideAStepAreClearErrors) {
  TwoParts t = two_parts();
  const Tensor x = weft::constant({1.f, -2.f, 3.f});
  // Run alone, with no rendezvous: the Send says what is missing.
  try {
    (void)t.producer->run({&x, 1});
    ADD_FAILURE() << "Send needs a rendezvous";
  } catch (const FailedPrecondition& e) {
    EXPECT_NE(std::string(e.what()).find("no rendezvous"), std::string::npos) << e.what();
  }
  // Eagerly: Recv is graph-only.
  EXPECT_THROW(dispatch(op_def("Recv"), {}, recv_attrs("y:0", {3})), FailedPrecondition);
  // A key that cannot be valid is refused when the node is made.
  GraphIR g;
  Attrs bad = recv_attrs("y:0", {3});
  bad.set("send_device", std::string("/cpu:0"));
  EXPECT_THROW(add(g, "Recv", {}, bad, "r"), InvalidArgument);
}

// An asynchronous kernel that finishes on another thread 20 ms after it starts, as a Recv does
// while its tensor is copied onto or off a GPU; with `say_wait_over`, it tells the step so first.
void finish_late(KernelContext& ctx, AsyncDone done, bool say_wait_over) {
  if (say_wait_over) ctx.run_context().async_wait_over(ctx);
  Tensor* out = &ctx.output(0);
  const Tensor in = ctx.input(0);
  std::thread([out, in, done = std::move(done)] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    *out = neg(in);
    done(nullptr);
  }).detach();
}

void register_late_finisher() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_builtin_ops();
    auto infer = [](InferContext& c) { c.set_output(0, c.input_dtype(0), c.input_shape(0)); };
    for (const char* name : {"StepTestCopies", "StepTestWaits"})
      op_registry().add({.name = name, .display = name, .min_inputs = 1, .max_inputs = 1, .infer = infer});
    register_async_kernel("StepTestCopies", DeviceType::CPU, float32,
                          [](KernelContext& ctx, AsyncDone done) { finish_late(ctx, std::move(done), true); });
    register_async_kernel("StepTestWaits", DeviceType::CPU, float32,
                          [](KernelContext& ctx, AsyncDone done) { finish_late(ctx, std::move(done), false); });
  });
}

// A step whose only unfinished kernel is copying what it received is not stuck: it finishes.
// The same kernel that never says its wait is over looks like a Recv nobody sends to, and the
// step fails at once, naming it: the check that replaces a hang still works.
TEST(ExecutorStep, AKernelFinishingACopyIsNotStuckButOneStillWaitingIs) {
  register_late_finisher();
  for (const char* type : {"StepTestCopies", "StepTestWaits"}) {
    auto g = std::make_shared<GraphIR>();
    const int32_t x = placeholder(*g, float32, {3}, "x");
    const int32_t y = add(*g, type, {{x, 0}}, {}, "late");
    Executor exec(g, ExecutorSpec{.feeds = {{x, 0}}, .fetches = {{y, 0}}});
    LocalRendezvous rdv;
    const Tensor xv = weft::constant({1.f, -2.f, 3.f});
    std::vector<Tensor> fetched;
    const std::vector<Executor::Part> parts = {{&exec, {&xv, 1}, &fetched}};
    if (std::string(type) == "StepTestCopies") {
      Executor::run_together(parts, {.step_id = 7, .rendezvous = &rdv});
      ASSERT_EQ(fetched.size(), 1u);
      EXPECT_EQ(fetched[0].to_vector<float>(), (std::vector<float>{-1.f, 2.f, -3.f}));
    } else {
      try {
        Executor::run_together(parts, {.step_id = 8, .rendezvous = &rdv});
        ADD_FAILURE() << "a kernel that waits with nobody to send looks stuck";
      } catch (const Internal& e) {
        EXPECT_NE(std::string(e.what()).find("cannot finish"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("late"), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace weft
