// Checkpoints: object paths, save/restore of models and optimizers (training resumes bit for
// bit), deferred restores, damaged files, CheckpointManager, restoring into a Graph run by a
// Session, a save killed midway, and the file read by Python's safetensors.
#include "api/checkpoint/checkpoint.h"

#include <gtest/gtest.h>

#include "temp_dir.h"
#include "tensor_test_util.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "weft/weft.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

class TempDir : public testing::TempDir {
 public:
  TempDir() : testing::TempDir("weft_ckpt") {}
};

std::vector<std::string> paths_of(const Checkpoint& c) {
  std::vector<std::string> out;
  for (auto& [p, v] : c.variables()) out.push_back(p);
  return out;
}

nn::Sequential small_model() { return nn::Sequential{nn::Dense(4, nn::relu), nn::Dropout(0.5), nn::Dense(2)}; }

void train_step(const nn::Module& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
  GradientTape tape;
  Tensor loss = reduce_mean(square(model(x) - y));
  std::vector<Variable> vars = model.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
}

std::vector<std::vector<float>> weights(const nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (const Variable& v : m.variables()) out.push_back(v.value().to_vector<float>());
  return out;
}

const Tensor& inputs() {
  static const Tensor x = random::normal({8, 3}, 0, 1, /*seed=*/11);
  return x;
}
const Tensor& targets() {
  static const Tensor y = random::normal({8, 2}, 0, 1, /*seed=*/12);
  return y;
}

TEST(Checkpoint, PathsFollowTheObjectsNotTheGlobalLayerNames) {
  nn::Sequential model = small_model();
  optim::Adam opt(0.01);
  Variable step(constant(int64_t{0}), "step", false);
  Checkpoint ckpt({{"model", model}, {"optimizer", opt}, {"step", step}});
  EXPECT_EQ(paths_of(ckpt), (std::vector<std::string>{"step", "optimizer/iterations"}));  // nothing built yet
  train_step(model, opt, inputs(), targets());
  const std::vector<std::string> want = {
      "model/dense/kernel",          "model/dense/bias",          "model/dense_1/kernel",
      "model/dense_1/bias",          "step",                      "optimizer/iterations",
      "optimizer/model/dense/kernel/m", "optimizer/model/dense/kernel/v", "optimizer/model/dense/bias/m",
      "optimizer/model/dense/bias/v",   "optimizer/model/dense_1/kernel/m", "optimizer/model/dense_1/kernel/v",
      "optimizer/model/dense_1/bias/m", "optimizer/model/dense_1/bias/v"};
  EXPECT_EQ(paths_of(ckpt), want);
  // A second copy of the architecture in this process has other layer names, the same paths.
  nn::Sequential again = small_model();
  again(inputs());
  EXPECT_NE(again.layers()[0].name(), "dense");
  EXPECT_EQ(paths_of(Checkpoint({{"model", again}})), (std::vector<std::string>(want.begin(), want.begin() + 4)));
}

TEST(Checkpoint, KeysAreChecked) {
  Variable w(constant(1.f));
  expect_error<InvalidArgument>([&] { Checkpoint({{"a", w}, {"a", w}}); }, {"'a'", "twice"});
  expect_error<InvalidArgument>([&] { Checkpoint({{"a/b", w}}); }, {"'a/b'"});
  expect_error<InvalidArgument>([&] { Checkpoint({{"", w}}); }, {"non-empty"});
}

TEST(Checkpoint, TrainingResumesBitForBitFromARestore) {
  TempDir dir;
  nn::Sequential a = small_model();
  optim::Adam opt_a(0.01);
  for (int i = 0; i < 3; ++i) train_step(a, opt_a, inputs(), targets());
  Checkpoint({{"model", a}, {"optimizer", opt_a}}).save(dir.file("a.safetensors"));
  for (int i = 0; i < 2; ++i) train_step(a, opt_a, inputs(), targets());

  // A fresh model and optimizer: neither the layers nor Adam's slots exist at restore time.
  nn::Sequential b = small_model();
  optim::Adam opt_b(0.01);
  RestoreReport r = Checkpoint({{"model", b}, {"optimizer", opt_b}}).restore(dir.file("a.safetensors"));
  EXPECT_EQ(r.restored, (std::vector<std::string>{"optimizer/iterations"}));
  EXPECT_EQ(r.deferred.size(), 12u);
  EXPECT_TRUE(r.missing.empty() && r.unused.empty());
  EXPECT_EQ(opt_b.iterations(), 3);
  for (int i = 0; i < 2; ++i) train_step(b, opt_b, inputs(), targets());
  EXPECT_EQ(weights(b), weights(a));
  EXPECT_EQ(opt_b.iterations(), 5);
  EXPECT_EQ(opt_b.slot(b.trainable_variables()[0], "v").value().to_vector<float>(),
            opt_a.slot(a.trainable_variables()[0], "v").value().to_vector<float>());
}

TEST(Checkpoint, RestoreIntoBuiltVariablesIsImmediate) {
  TempDir dir;
  nn::Dense d(3);
  Tensor x = inputs();
  Tensor want = d(x);
  Checkpoint({{"dense", d}}).save(dir.file("d.safetensors"));
  nn::Dense e(3);
  e(x);
  RestoreReport r = Checkpoint({{"dense", e}}).restore(dir.file("d.safetensors"));
  EXPECT_EQ(r.restored, (std::vector<std::string>{"dense/kernel", "dense/bias"}));
  EXPECT_EQ(e(x).to_vector<float>(), want.to_vector<float>());
}

TEST(Checkpoint, DeferredRestoreAppliesWhenTheLayerBuilds) {
  TempDir dir;
  nn::Dense d(3);
  Tensor want = d(inputs());
  Checkpoint({{"layer", d}}).save(dir.file("d.safetensors"));
  nn::Dense later(3);
  RestoreReport r = Checkpoint({{"layer", later}}).restore(dir.file("d.safetensors"));
  EXPECT_EQ(r.deferred, (std::vector<std::string>{"layer/bias", "layer/kernel"}));
  EXPECT_FALSE(later.kernel().defined());
  EXPECT_EQ(later(inputs()).to_vector<float>(), want.to_vector<float>());
  EXPECT_EQ(later.kernel().value().to_vector<float>(), d.kernel().value().to_vector<float>());

  // A deferred value that does not fit the variable fails when the layer builds, naming it.
  nn::Dense wrong(5);
  Checkpoint({{"layer", wrong}}).restore(dir.file("d.safetensors"));
  expect_error<InvalidArgument>([&] { wrong(inputs()); }, {"'layer/kernel'", "(3, 3)", "(3, 5)"});
}

TEST(Checkpoint, EveryDTypeOfVariableRoundTrips) {
  TempDir dir;
  std::vector<std::pair<std::string, Trackable>> objects;
  std::vector<Variable> vars;
  const DType all[] = {float16, bfloat16, float32, float64, int8, uint8, int32, int64, bool_};
  for (DType d : all) {
    vars.emplace_back(cast(random::uniform({2, 3}, 0, 2, /*seed=*/5), d), std::string(dtype_name(d)));
    objects.emplace_back(std::string(dtype_name(d)), vars.back());
  }
  Checkpoint ckpt(objects);
  ckpt.save(dir.file("all.safetensors"));
  std::vector<Tensor> saved;
  for (Variable& v : vars) {
    saved.push_back(v.value());
    v.assign(zeros_like(v.value()));
  }
  ckpt.restore(dir.file("all.safetensors"));
  for (size_t i = 0; i < vars.size(); ++i)
    EXPECT_EQ(cast(vars[i].value(), float64).to_vector<double>(), cast(saved[i], float64).to_vector<double>()) << i;
}

TEST(Checkpoint, MismatchedDTypeOrShapeFailsBeforeChangingAnything) {
  TempDir dir;
  Variable w(constant({1.f, 2.f}), "w"), b(constant(3.f), "b");
  Checkpoint({{"w", w}, {"b", b}}).save(dir.file("c.safetensors"));

  Variable w64(constant({0.0, 0.0}), "w"), b2(constant(0.f), "b");
  expect_error<InvalidArgument>([&] { Checkpoint({{"b", b2}, {"w", w64}}).restore(dir.file("c.safetensors")); },
                                {"[checkpoint]", "'w'", "c.safetensors", "float32 (2,)", "float64 (2,)"});
  EXPECT_EQ(b2.value().item<float>(), 0.f);  // not half-restored

  Variable w3(constant({0.f, 0.f, 0.f}), "w");
  expect_error<InvalidArgument>([&] { Checkpoint({{"w", w3}}).restore(dir.file("c.safetensors")); },
                                {"'w'", "(2,)", "(3,)"});
}

TEST(Checkpoint, MissingVariablesAreNamedUnlessAllowed) {
  TempDir dir;
  Variable w(constant(1.f), "w");
  Checkpoint({{"w", w}}).save(dir.file("w.safetensors"));
  Variable w2(constant(5.f)), extra(constant(7.f));
  Checkpoint both({{"w", w2}, {"extra", extra}});
  expect_error<NotFound>([&] { both.restore(dir.file("w.safetensors")); }, {"'extra'", "allow_missing"});
  EXPECT_EQ(w2.value().item<float>(), 5.f);
  RestoreReport r = both.restore(dir.file("w.safetensors"), {.allow_missing = true});
  EXPECT_EQ(r.missing, (std::vector<std::string>{"extra"}));
  EXPECT_EQ(w2.value().item<float>(), 1.f);
  EXPECT_EQ(extra.value().item<float>(), 7.f);
  // Entries nothing asks for are reported, not an error.
  EXPECT_EQ(Checkpoint({{"other", w2}}).restore(dir.file("w.safetensors"), {.allow_missing = true}).unused,
            (std::vector<std::string>{"w"}));
}

TEST(Checkpoint, DamagedFilesRaiseDataLossNamingTheTensor) {
  TempDir dir;
  Variable a(random::normal({64}, 0, 1, 1), "a"), b(random::normal({64}, 0, 1, 2), "b");
  Checkpoint ckpt({{"a", a}, {"b", b}});
  const std::string path = dir.file("c.safetensors");
  ckpt.save(path);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [&](const std::string& content) { std::ofstream(path, std::ios::binary | std::ios::trunc) << content; };
  std::string flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x40;  // inside "b", the last tensor
  write(flipped);
  expect_error<DataLoss>([&] { ckpt.restore(path); }, {"c.safetensors", "'b'", "checksum"});
  write(bytes.substr(0, bytes.size() - 100));
  expect_error<DataLoss>([&] { ckpt.restore(path); }, {"'b'"});
  write(bytes);
  ckpt.restore(path);
}

TEST(Checkpoint, ManagerKeepsTheNewestMaxToKeep) {
  TempDir dir;
  Variable w(constant(0.f), "w");
  Checkpoint ckpt({{"w", w}});
  CheckpointManager manager(ckpt, dir.file("run"), /*max_to_keep=*/2);
  EXPECT_EQ(manager.latest_checkpoint(), "");
  EXPECT_EQ(manager.restore_or_initialize(), "");
  for (int i = 1; i <= 5; ++i) {
    w.assign(constant(static_cast<float>(i)));
    EXPECT_EQ(manager.save(), dir.file("run/ckpt-" + std::to_string(i) + ".safetensors"));
  }
  EXPECT_EQ(manager.checkpoints(), (std::vector<std::string>{dir.file("run/ckpt-4.safetensors"), dir.file("run/ckpt-5.safetensors")}));
  EXPECT_EQ(latest_checkpoint(dir.file("run")), dir.file("run/ckpt-5.safetensors"));
  std::ofstream(dir.file("run/ckpt-9.safetensors.tmp-1-0")) << "partial";  // a killed save's leftover
  std::ofstream(dir.file("run/notes.txt")) << "x";

  // A new process (here: a new manager) continues the numbering and resumes from the newest.
  w.assign(constant(-1.f));
  CheckpointManager resumed(ckpt, dir.file("run"), 2);
  EXPECT_EQ(resumed.restore_or_initialize(), dir.file("run/ckpt-5.safetensors"));
  EXPECT_EQ(w.value().item<float>(), 5.f);
  EXPECT_EQ(resumed.save(), dir.file("run/ckpt-6.safetensors"));
  EXPECT_FALSE(fs::exists(dir.file("run/ckpt-4.safetensors")));
  expect_error<InvalidArgument>([&] { CheckpointManager(ckpt, dir.path(), 0); }, {"max_to_keep"});
}

// Builds the same architecture in a TF1 graph; the result is the graph's output tensor.
Tensor build_in_graph(Graph& g, const nn::Module& model, Tensor* input) {
  GraphScope scope(g);
  *input = placeholder(float32, {-1, 3}, "x");
  return identity(model(*input), "y");
}

void expect_close(const Tensor& got, const Tensor& want) {
  auto g = got.to_vector<float>(), w = want.to_vector<float>();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-5) << i;
}

TEST(Checkpoint, EagerCheckpointRestoresIntoAGraphRunBySession) {
  TempDir dir;
  nn::Sequential eager = small_model();
  Tensor want = eager(inputs());
  Checkpoint({{"model", eager}}).save(dir.file("m.safetensors"));

  // Restored before the graph is built: applied as the layers build their graph variables.
  {
    Graph g;
    nn::Sequential model = small_model();
    Checkpoint({{"model", model}}).restore(dir.file("m.safetensors"));
    Tensor x;
    Tensor y = build_in_graph(g, model, &x);
    Session sess(g);
    expect_close(sess.run({{x, inputs()}}, {y})[0], want);
  }
  // Restored after the graph is built, before its Session runs: the initialisers are skipped.
  {
    Graph g;
    nn::Sequential model = small_model();
    Tensor x;
    Tensor y = build_in_graph(g, model, &x);
    Checkpoint ckpt({{"model", model}});
    expect_error<FailedPrecondition>([&] { ckpt.save(dir.file("early.safetensors")); }, {"model/dense/kernel"});
    ckpt.restore(dir.file("m.safetensors"));
    Session sess(g);
    expect_close(sess.run({{x, inputs()}}, {y})[0], want);
    // And a graph's variables save like eager ones.
    ckpt.save(dir.file("from_graph.safetensors"));
    nn::Sequential back = small_model();
    Checkpoint({{"model", back}}).restore(dir.file("from_graph.safetensors"));
    expect_close(back(inputs()), want);
  }
}

TEST(Checkpoint, SaveKilledMidwayLeavesThePreviousCheckpoint) {
  TempDir dir;
  const std::string path = dir.file("big.safetensors");
  const int64_t n = 32 << 20;  // 128 MB of float32: a save takes long enough to be caught midway
  // Filled in place: no second 128 MB copy.
  Variable v(Tensor::empty(float32, {n}), "big");
  std::fill_n(v.value_for_update().data<float>(), n, 1.0f);
  Checkpoint ckpt({{"big", v}});
  ckpt.save(path);
  std::fill_n(v.value_for_update().data<float>(), n, 2.0f);

  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Only this thread exists in the child: save touches no thread pool, only the file.
    ::close(ready[0]);
    char c = 1;
    if (::write(ready[1], &c, 1) != 1) ::_exit(2);
    for (;;) {
      try {
        ckpt.save(path);
      } catch (...) {
        ::_exit(3);
      }
    }
  }
  ::close(ready[1]);
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  // Kill it while it writes: as soon as its temporary file shows up, after a random moment more.
  auto temporaries = [&] {
    int count = 0;
    for (auto& e : fs::directory_iterator(dir.path())) count += e.path().filename().string().find(".tmp-") != std::string::npos;
    return count;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool writing = false;
  while (!(writing = temporaries() > 0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  EXPECT_TRUE(writing) << "the child never started writing";
  std::mt19937 rng(static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 40));
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child ended by itself, status " << status;
  RecordProperty("temporary_files_left", temporaries());  // 1 when the kill came mid-save

  // Whichever save last completed, the file is whole: all ones or all twos, checksums intact.
  std::fill_n(v.value_for_update().data<float>(), n, 0.0f);
  ckpt.restore(path);
  const float* p = v.value().data<float>();
  const float first = p[0];
  EXPECT_TRUE(first == 1.0f || first == 2.0f) << first;
  EXPECT_EQ(std::count(p, p + n, first), n);
  // The next save removes what the killed one left.
  ckpt.save(path);
  EXPECT_EQ(temporaries(), 0);
}

// The interpreter is WEFT_TEST_SAFETENSORS_PYTHON from CMake: by default the venv scripts/setup
// makes in .cache/test-venv (Debian 12 packages no safetensors; numpy comes from the system).
TEST(Checkpoint, PythonSafetensorsReadsTheFile) {
  const std::string python = WEFT_TEST_SAFETENSORS_PYTHON;
  if (!fs::exists(python))
    GTEST_SKIP() << "no Python at " << python
                 << " (scripts/setup makes it, or configure with -DWEFT_TEST_SAFETENSORS_PYTHON=...)";
  if (std::system(("'" + python + "' -c 'import safetensors, numpy' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << python << " has no safetensors or no numpy (scripts/setup installs both)";
  TempDir dir;
  Variable f16(cast(constant({1.5f, -2.f}), float16)), f32(constant({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}})),
      f64(constant({0.25})), i8(cast(constant({-3, 4}), int8)), u8(cast(constant({200}), uint8)),
      i32(constant({7, -8, 9})), i64(constant(int64_t{1} << 40)), b(constant({true, false, true}));
  Checkpoint({{"f16", f16}, {"f32", f32}, {"f64", f64}, {"i8", i8}, {"u8", u8}, {"i32", i32}, {"i64", i64}, {"b", b}})
      .save(dir.file("c.safetensors"), {{"note", "hi"}});
  const std::string script = dir.file("read.py");
  std::ofstream(script) << "import sys\n"
                           "from safetensors import safe_open\n"
                           "with safe_open(sys.argv[1], framework='np') as f:\n"
                           "    print(f.metadata()['note'])\n"
                           "    for k in sorted(f.keys()):\n"
                           "        t = f.get_tensor(k)\n"
                           "        print(k, t.dtype, list(t.shape), t.flatten().tolist())\n";
  const std::string out_file = dir.file("out.txt");
  const std::string command = "'" + python + "' " + script + " " + dir.file("c.safetensors") + " > " + out_file;
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::ifstream in(out_file);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text,
            "hi\n"
            "b bool [3] [True, False, True]\n"
            "f16 float16 [2] [1.5, -2.0]\n"
            "f32 float32 [2, 3] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]\n"
            "f64 float64 [1] [0.25]\n"
            "i32 int32 [3] [7, -8, 9]\n"
            "i64 int64 [] [1099511627776]\n"
            "i8 int8 [2] [-3, 4]\n"
            "u8 uint8 [1] [200]\n");
}

}  // namespace
}  // namespace weft
