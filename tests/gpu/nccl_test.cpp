// The collective ops' CUDA kernels through NCCL (kernels/cuda/collective.cpp, comm/nccl/): on one
// GPU a group of one member (nranks 1) runs every collective for every dtype NCCL has; a cancelled
// step completes its pending collective with the step's error; a peer that never comes is
// Unavailable naming the group. Two processes (child_processes.h: this binary run again, one GPU
// each or one GPU as two hosts) run a group of two: sums, means, a broadcast from the second
// rank and all-gathers give the exact results; a peer that dies leaves the survivor's pending
// collective to the step's cancellation, which aborts the communicator and frees the GPU. The
// registration and dtype-mapping tests run without a GPU. With two GPUs, a group of two members in
// this one process (one communicator per GPU, issued together) gives the same exact results, and
// a member of this process that never comes is named.
#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>

#include "child_processes.h"
#include "comm/nccl/nccl_collectives.h"
#include "comm/nccl/nccl_dtype.h"
#include "comm/nccl/nccl_id.h"
#include "comm/step_collectives.h"
#include "gpu_test_util.h"
#include "runtime/cancellation.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/graph.h"

namespace weft::gpu_test {
namespace {

constexpr DType kNcclDtypes[] = {float16, bfloat16, float32, float64, int8, uint8, int32, int64};

TEST(NcclRegistration, CollectiveKernelsForEveryDtypeNcclHas) {
  register_builtin_ops();
  for (const char* name : {"CollectiveAllReduce", "CollectiveBroadcast", "CollectiveAllGather"}) {
    const OpDef* op = op_registry().find(name);
    ASSERT_NE(op, nullptr) << name;
    for (DType d : kNcclDtypes) EXPECT_NE(op->async_kernel(DeviceType::CUDA, d), nullptr) << name << " " << dtype_name(d);
    EXPECT_EQ(op->async_kernel(DeviceType::CUDA, bool_), nullptr) << name;
  }
}

TEST(NcclRegistration, DtypeMapping) {
  EXPECT_EQ(nccl_dtype(float16), ncclFloat16);
  EXPECT_EQ(nccl_dtype(bfloat16), ncclBfloat16);
  EXPECT_EQ(nccl_dtype(float32), ncclFloat32);
  EXPECT_EQ(nccl_dtype(float64), ncclFloat64);
  EXPECT_EQ(nccl_dtype(int8), ncclInt8);
  EXPECT_EQ(nccl_dtype(uint8), ncclUint8);
  EXPECT_EQ(nccl_dtype(int32), ncclInt32);
  EXPECT_EQ(nccl_dtype(int64), ncclInt64);
  EXPECT_FALSE(nccl_dtype(bool_).has_value());
  for (int d = 0; d < kNumDTypes; ++d)
    EXPECT_EQ(nccl_dtype(static_cast<DType>(d)).has_value(), nccl_dtype_supported(static_cast<DType>(d)));
  EXPECT_TRUE(nccl_compiled_in());
}

// A step: its id, its cancellation, and the process's collectives (as a step's executor gives).
class StepContext final : public RunContext {
 public:
  explicit StepContext(int64_t step) : step_(step) {}
  VariableState& variable(std::string_view name) override { throw NotFound("no variable " + std::string(name)); }
  std::vector<Tensor> call(const GraphIR&, std::span<const Tensor>, Device&) override {
    throw Internal("not a graph run");
  }
  int64_t step_id() const override { return step_; }
  CancellationManager* cancellation() const override { return &cm_; }
  Collectives* collectives() const override { return &process_step_collectives(); }
  CancellationManager& cm() { return cm_; }

 private:
  int64_t step_;
  mutable CancellationManager cm_;
};

// One kernel call in flight: what it needs to outlive the call, and its completion.
struct Pending {
  std::vector<Tensor> inputs, outputs;
  Attrs attrs;
  std::promise<std::exception_ptr> done;
  std::future<std::exception_ptr> result = done.get_future();

  // The kernel's error (null: success), failing the test if it does not complete in a minute.
  std::exception_ptr wait() {
    if (result.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      ADD_FAILURE() << "the collective did not complete within 60 s";
      return std::make_exception_ptr(Internal("timed out"));
    }
    return result.get();
  }
};

int64_t next_group_key() {
  static int64_t key = 1000;
  return key++;
}

Attrs group_attrs(Device& gpu, int64_t group_key, const std::string& id, int64_t instance = 0, int64_t instances = 1) {
  return {{"group_key", group_key},           {"group_members", cluster_device_name(gpu)},
          {"member", int64_t{0}},             {"instance_key", instance},
          {"group_instances", instances},     {"nccl_id", id}};
}

std::shared_ptr<Pending> start(Device& gpu, const char* op_name, const std::vector<Tensor>& host_inputs, Attrs attrs,
                               size_t num_outputs, DType dtype, RunContext* run = nullptr) {
  const OpDef* op = op_registry().find(op_name);
  auto p = std::make_shared<Pending>();
  for (const Tensor& t : host_inputs) p->inputs.push_back(t.to(&gpu));
  p->outputs.resize(num_outputs);
  p->attrs = std::move(attrs);
  AsyncKernelFn fn = op->async_kernel(DeviceType::CUDA, dtype);
  if (!fn) throw InvalidArgument(std::string("no CUDA kernel for ") + op_name);
  static StepContext step_zero(0);  // no run given: step 0, as an eager call is
  KernelContext ctx{.op = *op, .inputs = p->inputs, .outputs = p->outputs, .attrs = p->attrs, .device = gpu,
                    .run = run ? run : &step_zero};
  fn(ctx, [p](std::exception_ptr e) { p->done.set_value(e); });
  return p;
}

::testing::AssertionResult succeeded(std::exception_ptr e) {
  if (!e) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << message_of(e);
}

class Nccl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu()) GTEST_SKIP() << "no CUDA device (or no CUDA driver)";
    gpu_ = gpu();
    try {
      id_ = new_nccl_id();
    } catch (const Unavailable& e) {
      FAIL() << e.what();
    }
  }
  Device* gpu_ = nullptr;
  std::string id_;
};

// With one member, every collective gives back its input: exactly, for every dtype.
TEST_F(Nccl, OneMemberGroupRunsEveryCollectiveForEveryDtype) {
  uint64_t seed = 1;
  for (DType d : kNcclDtypes) {
    SCOPED_TRACE(dtype_name(d));
    const Tensor x = random_tensor(d, {3, 37}, seed++, Values::kGeneral);
    const Tensor y = random_tensor(d, {5}, seed++, Values::kGeneral);
    const Tensor empty = random_tensor(d, {0}, seed++, Values::kGeneral);
    const int64_t key = next_group_key();
    // A unique id serves one communicator (NCCL's bootstrap root takes nranks ranks once): a new
    // group needs a new id, as DataParallel makes one per group.
    const std::string id = d == kNcclDtypes[0] ? id_ : new_nccl_id();
    // One group, instances in order: a two-input all-reduce (a bucket), a mean, a broadcast from
    // the root, a broadcast to a non-root is impossible with one member, an all-gather, an empty one.
    Attrs sum = group_attrs(*gpu_, key, id, 0, 5);
    sum.set("reduction", std::string("sum"));
    auto a = start(*gpu_, "CollectiveAllReduce", {x, y}, sum, 2, d);
    Attrs mean = group_attrs(*gpu_, key, id, 1, 5);
    mean.set("reduction", std::string("mean"));
    auto b = start(*gpu_, "CollectiveAllReduce", {x}, mean, 1, d);
    Attrs root = group_attrs(*gpu_, key, id, 2, 5);
    root.set("root", int64_t{0});
    auto c = start(*gpu_, "CollectiveBroadcast", {y}, root, 1, d);
    auto e = start(*gpu_, "CollectiveAllGather", {x}, group_attrs(*gpu_, key, id, 3, 5), 1, d);
    auto f = start(*gpu_, "CollectiveAllGather", {empty}, group_attrs(*gpu_, key, id, 4, 5), 1, d);
    for (Pending* p : {a.get(), b.get(), c.get(), e.get(), f.get()}) ASSERT_TRUE(succeeded(p->wait()));
    EXPECT_TRUE(same_values(x, a->outputs[0].to(cpu_device()), 0));
    EXPECT_TRUE(same_values(y, a->outputs[1].to(cpu_device()), 0));
    EXPECT_TRUE(same_values(x, b->outputs[0].to(cpu_device()), 0));  // a mean over one member
    EXPECT_TRUE(same_values(y, c->outputs[0].to(cpu_device()), 0));
    EXPECT_TRUE(same_values(x, e->outputs[0].to(cpu_device()), 0));
    EXPECT_EQ(f->outputs[0].shape(), Shape({0}));
    EXPECT_EQ(a->outputs[0].device_ptr(), gpu_);
  }
}

// Instances issued out of turn wait: instance 1 of a step completes once instance 0 came.
TEST_F(Nccl, AnInstanceOutOfTurnWaitsForItsTurn) {
  const Tensor x = random_tensor(float32, {8}, 7, Values::kGeneral);
  const int64_t key = next_group_key();
  StepContext step(3);
  Attrs second = group_attrs(*gpu_, key, id_, 1, 2);
  second.set("reduction", std::string("sum"));
  auto later = start(*gpu_, "CollectiveAllReduce", {x}, second, 1, float32, &step);
  EXPECT_EQ(later->result.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);  // not its turn
  Attrs first = group_attrs(*gpu_, key, id_, 0, 2);
  first.set("reduction", std::string("sum"));
  auto earlier = start(*gpu_, "CollectiveAllReduce", {x}, first, 1, float32, &step);
  EXPECT_TRUE(succeeded(earlier->wait()));
  EXPECT_TRUE(succeeded(later->wait()));
  EXPECT_TRUE(same_values(x, later->outputs[0].to(cpu_device()), 0));
}

// A cancelled step completes its pending collective with the step's error; the communicator is
// then aborted, and the group runs again only under a new id.
TEST_F(Nccl, ACancelledStepFailsItsPendingCollectiveWithTheStepsError) {
  const Tensor x = random_tensor(float32, {8}, 9, Values::kGeneral);
  const int64_t key = next_group_key();
  StepContext step(5);
  Attrs waiting = group_attrs(*gpu_, key, id_, 1, 2);  // instance 0 never comes
  waiting.set("reduction", std::string("sum"));
  auto pending = start(*gpu_, "CollectiveAllReduce", {x}, waiting, 1, float32, &step);
  step.cm().cancel(std::make_exception_ptr(Unavailable("[step] task 1 was lost")));
  const std::exception_ptr e = pending->wait();
  ASSERT_NE(e, nullptr);
  EXPECT_THROW(std::rethrow_exception(e), Unavailable);
  EXPECT_EQ(message_of(e), "[step] task 1 was lost");
  StepContext next(6);
  Attrs again = group_attrs(*gpu_, key, id_, 0, 1);
  again.set("reduction", std::string("sum"));
  auto reuse = start(*gpu_, "CollectiveAllReduce", {x}, again, 1, float32, &next);
  const std::exception_ptr r = reuse->wait();
  ASSERT_NE(r, nullptr);
  EXPECT_THROW(std::rethrow_exception(r), FailedPrecondition);
  EXPECT_NE(message_of(r).find("group " + std::to_string(key)), std::string::npos) << message_of(r);
  EXPECT_NE(message_of(r).find("new nccl_id"), std::string::npos) << message_of(r);
  // A new id makes a new communicator.
  auto fresh = start(*gpu_, "CollectiveAllReduce", {x},
                     [&] {
                       Attrs a = group_attrs(*gpu_, key, new_nccl_id(), 0, 1);
                       a.set("reduction", std::string("sum"));
                       return a;
                     }(),
                     1, float32, &next);
  EXPECT_TRUE(succeeded(fresh->wait()));
}

// An all-reduce of 4 floats as member 0 of `members`, alone (the others never come), through
// collectives whose communicators must be up within 2 s: the error it completes with.
std::exception_ptr all_reduce_as_member_0(Device& gpu, int64_t key, const std::string& id,
                                          std::vector<std::string> members) {
  NcclCollectives collectives(std::chrono::seconds(2));
  CudaContext& cu = cuda_context(gpu);
  NcclCall call;
  call.p.kind = CollectiveKind::kAllReduce;
  call.p.op = "collective_all_reduce";
  call.p.group_key = key;
  call.p.members = std::move(members);
  call.p.member = 0;
  call.p.nccl_id = id;
  call.device = cu.device;
  call.compute = cu.stream;
  call.inputs = {random_tensor(float32, {4}, 3, Values::kGeneral).to(&gpu)};
  call.outputs = {Tensor::empty(float32, {4}, &gpu)};
  std::promise<std::exception_ptr> done;
  collectives.run_async(std::move(call), [&](std::exception_ptr e) { done.set_value(e); });
  auto f = done.get_future();
  if (f.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "the all-reduce did not complete within 60 s";
    return nullptr;
  }
  return f.get();
}

// A group of two whose second rank never joins: Unavailable naming the group and the ranks once
// the communicator's deadline passes, not a hang.
TEST_F(Nccl, AMissingPeerIsUnavailableNamingTheGroup) {
  const int64_t key = next_group_key();
  const std::exception_ptr e = all_reduce_as_member_0(
      *gpu_, key, id_, {cluster_device_name(*gpu_), "/job:absent/replica:0/task:1/device:GPU:0"});
  ASSERT_NE(e, nullptr);
  EXPECT_THROW(std::rethrow_exception(e), Unavailable);
  const std::string m = message_of(e);
  EXPECT_NE(m.find("group " + std::to_string(key)), std::string::npos) << m;
  EXPECT_NE(m.find("rank 0 of 2"), std::string::npos) << m;
  EXPECT_NE(m.find("/job:absent/replica:0/task:1"), std::string::npos) << m;
}

// Without an id, or with a member on this task that is not one of its GPUs (its node would never
// come), the collective explains why it cannot run instead of waiting.
TEST_F(Nccl, NodesNcclCannotRunAreInvalidArgument) {
  const Tensor x = random_tensor(float32, {4}, 5, Values::kGeneral);
  const Attrs no_id{{"group_key", int64_t{1}}, {"group_members", cluster_device_name(*gpu_)}, {"member", int64_t{0}},
                {"instance_key", int64_t{0}}, {"group_instances", int64_t{1}}, {"reduction", std::string("sum")}};
  std::exception_ptr e = start(*gpu_, "CollectiveAllReduce", {x}, no_id, 1, float32)->wait();
  ASSERT_NE(e, nullptr);
  EXPECT_NE(message_of(e).find("no nccl_id attribute"), std::string::npos) << message_of(e);
  Attrs two_here = group_attrs(*gpu_, next_group_key(), id_);
  const std::string task = task_of_device(cluster_device_name(*gpu_), "test");
  two_here.set("group_members", cluster_device_name(*gpu_) + "," + task + "/device:GPU:63");
  two_here.set("reduction", std::string("sum"));
  e = start(*gpu_, "CollectiveAllReduce", {x}, two_here, 1, float32)->wait();
  ASSERT_NE(e, nullptr);
  EXPECT_THROW(std::rethrow_exception(e), InvalidArgument);
  EXPECT_NE(message_of(e).find("/device:GPU:63) is on this task, which has"), std::string::npos) << message_of(e);
}

// ---- two processes: a group of two ----

constexpr const char* kMemberDir = "WEFT_NCCL_TEST_DIR";
constexpr const char* kMemberRank = "WEFT_NCCL_TEST_RANK";

std::string gpu_of_task(int task) { return "/job:worker/replica:0/task:" + std::to_string(task) + "/device:GPU:0"; }

// A host tensor of `dtype` holding `v` (small integers: exact in every dtype).
Tensor host_tensor(DType dtype, const std::vector<float>& v) {
  const Shape shape{static_cast<int64_t>(v.size())};
  const Tensor f = Tensor::from_host(float32, shape, v.data());
  return dtype == float32 ? f : run_on(*cpu_device(), "Cast", {f}, dtype, shape, Attrs{{"dtype", dtype}});
}

// Member `rank`'s input, value i being i % 17 + 20 * rank: sums, means and gathers of these are
// exact in every dtype. `rank` -1 gives the sum over both members, -2 their mean.
std::vector<float> member_values(int rank, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto base = static_cast<float>(i % 17);
    v[static_cast<size_t>(i)] = rank == -1 ? 2 * base + 20 : rank == -2 ? base + 10 : base + 20.f * static_cast<float>(rank);
  }
  return v;
}

Tensor member_input(DType dtype, int rank, int64_t n) { return host_tensor(dtype, member_values(rank, n)); }

// A child's rank and meeting folder (null: not run as a child), its task set to its rank.
struct Member {
  int rank = -1;
  std::string dir;
  Device* gpu = nullptr;
  std::string id;  // the group's NCCL id: rank 0 makes it, rank 1 reads it

  static Member join() {
    Member m;
    const char* dir = std::getenv(kMemberDir);
    const char* rank = std::getenv(kMemberRank);
    if (!dir || !rank) return m;
    m.dir = dir;
    m.rank = std::atoi(rank);
    set_local_task("worker", m.rank);
    m.gpu = ::weft::gpu_test::gpu();
    if (m.rank == 0) {
      m.id = new_nccl_id();
      write_file_whole(m.dir + "/id", m.id);
    } else if (wait_for_file(m.dir + "/id", std::chrono::seconds(60))) {
      std::ifstream(m.dir + "/id") >> m.id;
    }
    return m;
  }

  Attrs attrs(int64_t instance, int64_t instances) const {
    return {{"group_key", int64_t{77}},  {"group_members", gpu_of_task(0) + "," + gpu_of_task(1)},
            {"member", int64_t{rank}},   {"instance_key", instance},
            {"group_instances", instances}, {"nccl_id", id}};
  }
};

// Runs TwoProcessChild.<test> as ranks 0 and 1 and expects both to pass.
void run_two_members(const std::string& test) {
  TempDir dir("weft_gpu_children");
  pid_t pids[2];
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> env = nccl_rank_environment(r);
    env.push_back(std::string(kMemberDir) + "=" + dir.path());
    env.push_back(std::string(kMemberRank) + "=" + std::to_string(r));
    pids[r] = spawn_test_child("TwoProcessChild." + test, env);
    ASSERT_GT(pids[r], 0);
  }
  for (int r = 0; r < 2; ++r) EXPECT_EQ(wait_test_child(pids[r], std::chrono::seconds(150)), "") << "rank " << r;
}

TEST(TwoProcessChild, Collectives) {
  const Member m = Member::join();
  if (m.rank < 0) GTEST_SKIP() << "run by NcclTwoProcesses.CollectivesGiveExactResults";
  ASSERT_NE(m.gpu, nullptr);
  ASSERT_FALSE(m.id.empty()) << "rank 0 made no id";
  const int64_t n = 1000;
  StepContext step(1);
  Attrs sum = m.attrs(0, 5);
  sum.set("reduction", std::string("sum"));
  auto a = start(*m.gpu, "CollectiveAllReduce", {member_input(float32, m.rank, n), member_input(int64, m.rank, 3)}, sum,
                 2, float32, &step);
  Attrs mean = m.attrs(1, 5);
  mean.set("reduction", std::string("mean"));
  auto b = start(*m.gpu, "CollectiveAllReduce", {member_input(bfloat16, m.rank, n)}, mean, 1, bfloat16, &step);
  Attrs from_second = m.attrs(2, 5);
  from_second.set("root", int64_t{1});
  std::vector<Tensor> sent;  // the root sends; the other member says what it receives
  if (m.rank == 1) {
    sent.push_back(member_input(int32, 1, n));
  } else {
    from_second.set("dtype", int32);
    from_second.set("shape", Shape({n}));
  }
  auto c = start(*m.gpu, "CollectiveBroadcast", sent, from_second, 1, int32, &step);
  auto d = start(*m.gpu, "CollectiveAllGather", {member_input(float16, m.rank, 4)}, m.attrs(3, 5), 1,
                 float16, &step);
  Attrs big = m.attrs(4, 5);
  big.set("reduction", std::string("sum"));
  auto e = start(*m.gpu, "CollectiveAllReduce", {member_input(float32, m.rank, 1 << 22)}, big, 1, float32, &step);
  for (Pending* p : {a.get(), b.get(), c.get(), d.get(), e.get()}) ASSERT_TRUE(succeeded(p->wait()));

  EXPECT_TRUE(same_values(member_input(float32, -1, n), a->outputs[0].to(cpu_device()), 0));
  EXPECT_TRUE(same_values(member_input(int64, -1, 3), a->outputs[1].to(cpu_device()), 0));
  EXPECT_TRUE(same_values(member_input(bfloat16, -2, n), b->outputs[0].to(cpu_device()), 0));
  EXPECT_TRUE(same_values(member_input(int32, 1, n), c->outputs[0].to(cpu_device()), 0)) << "rank 1's tensor";
  std::vector<float> both = member_values(0, 4);
  for (float x : member_values(1, 4)) both.push_back(x);
  EXPECT_TRUE(same_values(host_tensor(float16, both), d->outputs[0].to(cpu_device()), 0));
  EXPECT_TRUE(same_values(member_input(float32, -1, 1 << 22), e->outputs[0].to(cpu_device()), 0));
}

TEST(TwoProcessChild, PeerDies) {
  const Member m = Member::join();
  if (m.rank < 0) GTEST_SKIP() << "run by NcclTwoProcesses.ACollectiveWhosePeerDiedEndsWithItsStep";
  ASSERT_NE(m.gpu, nullptr);
  ASSERT_FALSE(m.id.empty()) << "rank 0 made no id";
  StepContext step(1);
  Attrs first = m.attrs(0, 2);
  first.set("reduction", std::string("sum"));
  ASSERT_TRUE(succeeded(start(*m.gpu, "CollectiveAllReduce", {member_input(float32, m.rank, 64)}, first, 1, float32,
                              &step)->wait()));
  if (m.rank == 1) std::_Exit(0);  // dies with its communicator up, the second collective never issued

  Attrs second = m.attrs(1, 2);
  second.set("reduction", std::string("sum"));
  auto stuck = start(*m.gpu, "CollectiveAllReduce", {member_input(float32, 0, 64)}, second, 1, float32, &step);
  // NCCL's network transport may see the closed connection itself; if not, the cluster would
  // cancel the step when it loses the task, as here after two seconds.
  if (stuck->result.wait_for(std::chrono::seconds(2)) != std::future_status::ready)
    step.cm().cancel(std::make_exception_ptr(Unavailable("[step] task 1 was lost")));
  const std::exception_ptr e = stuck->wait();
  ASSERT_NE(e, nullptr) << "a sum with a dead peer succeeded";
  std::printf("[rank 0] the pending collective ended with: %s\n", message_of(e).c_str());
  // The communicator is aborted: the GPU is free for the next step.
  const Tensor x = member_input(float32, 0, 64);
  EXPECT_TRUE(same_values(run_on(*cpu_device(), "Add", {x, x}, float32, x.shape()),
                          run_on(*m.gpu, "Add", {x, x}, float32, x.shape()), 0));
}

TEST(NcclTwoProcesses, CollectivesGiveExactResults) {
  WEFT_REQUIRE_GPU();
  run_two_members("Collectives");
}

TEST(NcclTwoProcesses, ACollectiveWhosePeerDiedEndsWithItsStep) {
  WEFT_REQUIRE_GPU();
  run_two_members("PeerDies");
}

// ---- several GPUs in one process: one communicator per GPU, issued together ----

Attrs local_pair_attrs(const std::vector<Device*>& gpus, int member, int64_t key, const std::string& id,
                       int64_t instance, int64_t instances) {
  Attrs a = group_attrs(*gpus[static_cast<size_t>(member)], key, id, instance, instances);
  a.set("group_members", cluster_device_name(*gpus[0]) + "," + cluster_device_name(*gpus[1]));
  a.set("member", int64_t{member});
  return a;
}

// Two members on two GPUs of this process, their nodes started one after the other from one
// thread (as an executor may): each instance is issued once both came, and gives the exact sums,
// means, broadcasts and gathers. Instance 1 of member 1 comes before instance 0 of member 0.
TEST(NcclLocalMembers, TwoGpusInOneProcessGiveExactResults) {
  const std::vector<Device*> gpus = two_gpus();
  if (gpus.empty()) GTEST_SKIP() << "needs two CUDA devices in one process";
  const int64_t key = next_group_key(), n = 300;
  const std::string id = new_nccl_id();
  StepContext step(1);
  auto attrs = [&](int member, int64_t instance, const char* what, const char* value) {
    Attrs a = local_pair_attrs(gpus, member, key, id, instance, 4);
    if (what) a.set(what, std::string(value));
    return a;
  };
  std::vector<std::shared_ptr<Pending>> sum(2), mean(2), bcast(2), gather(2);
  mean[1] = start(*gpus[1], "CollectiveAllReduce", {member_input(float32, 1, n)}, attrs(1, 1, "reduction", "mean"), 1,
                  float32, &step);
  for (int m = 0; m < 2; ++m)
    sum[static_cast<size_t>(m)] = start(*gpus[static_cast<size_t>(m)], "CollectiveAllReduce",
                                        {member_input(int32, m, n)}, attrs(m, 0, "reduction", "sum"), 1, int32, &step);
  mean[0] = start(*gpus[0], "CollectiveAllReduce", {member_input(float32, 0, n)}, attrs(0, 1, "reduction", "mean"), 1,
                  float32, &step);
  for (int m = 0; m < 2; ++m) {
    Attrs b = attrs(m, 2, nullptr, nullptr);
    b.set("root", int64_t{1});
    if (m == 0) {  // the root sends; the other member says what it receives
      b.set("shape", Shape({n}));
      b.set("dtype", bfloat16);
    }
    const std::vector<Tensor> in = m == 1 ? std::vector<Tensor>{member_input(bfloat16, 1, n)} : std::vector<Tensor>{};
    bcast[static_cast<size_t>(m)] = start(*gpus[static_cast<size_t>(m)], "CollectiveBroadcast", in, b, 1, bfloat16, &step);
    gather[static_cast<size_t>(m)] = start(*gpus[static_cast<size_t>(m)], "CollectiveAllGather",
                                           {member_input(float32, m, n)}, attrs(m, 3, nullptr, nullptr), 1, float32, &step);
  }
  for (int m = 0; m < 2; ++m) {
    SCOPED_TRACE("member " + std::to_string(m));
    const auto i = static_cast<size_t>(m);
    ASSERT_TRUE(succeeded(sum[i]->wait()));
    ASSERT_TRUE(succeeded(mean[i]->wait()));
    ASSERT_TRUE(succeeded(bcast[i]->wait()));
    ASSERT_TRUE(succeeded(gather[i]->wait()));
    EXPECT_EQ(sum[i]->outputs[0].device_ptr(), gpus[i]);
    EXPECT_TRUE(same_values(member_input(int32, -1, n), sum[i]->outputs[0].to(cpu_device()), 0));
    EXPECT_TRUE(same_values(member_input(float32, -2, n), mean[i]->outputs[0].to(cpu_device()), 0));
    EXPECT_TRUE(same_values(member_input(bfloat16, 1, n), bcast[i]->outputs[0].to(cpu_device()), 0));
    std::vector<float> both = member_values(0, n), second = member_values(1, n);
    both.insert(both.end(), second.begin(), second.end());
    EXPECT_TRUE(same_values(host_tensor(float32, both), gather[i]->outputs[0].to(cpu_device()), 0));
  }
}

// Member 1 of this process never runs its node: member 0's collective fails once the wait for it
// passes, naming it, instead of waiting forever.
TEST(NcclLocalMembers, AMemberOfThisProcessThatNeverComesIsNamed) {
  const std::vector<Device*> gpus = two_gpus();
  if (gpus.empty()) GTEST_SKIP() << "needs two CUDA devices in one process";
  const std::exception_ptr e = all_reduce_as_member_0(*gpus[0], next_group_key(), new_nccl_id(),
                                                      {cluster_device_name(*gpus[0]), cluster_device_name(*gpus[1])});
  ASSERT_NE(e, nullptr);
  EXPECT_THROW(std::rethrow_exception(e), DeadlineExceeded);
  EXPECT_NE(message_of(e).find("member(s) 1 of this process"), std::string::npos) << message_of(e);
}

}  // namespace
}  // namespace weft::gpu_test
