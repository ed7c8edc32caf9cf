// ReadShardedBatch and data::ShardedInput: each replica's rows against the global batch split,
// epochs, shuffling, positions, eager vs traced, errors; files written here (IDX and .npy).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <thread>

#include "api/dispatch.h"
#include "runtime/idx.h"
#include "runtime/npy.h"
#include "runtime/shard_split.h"
#include "runtime/sharded_input.h"
#include "weft/weft.h"

namespace weft {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

Bytes idx_header(unsigned char type, const std::vector<uint32_t>& dims) {
  Bytes b = {0, 0, type, static_cast<unsigned char>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(d >> s));
  return b;
}

// Example i of the IDX files: features (2, 3) uint8 with values 6i .. 6i+5, label i % 7.
constexpr int64_t kN = 10;

class ShardedInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reset_sharded_inputs();
    std::string tmpl = (fs::temp_directory_path() / "weft_shard_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    Bytes x = idx_header(0x08, {kN, 2, 3}), y = idx_header(0x08, {kN});
    for (int64_t i = 0; i < kN; ++i) {
      for (int k = 0; k < 6; ++k) x.push_back(static_cast<unsigned char>(6 * i + k));
      y.push_back(static_cast<unsigned char>(i % 7));
    }
    images_ = write("images.idx", x);
    labels_ = write("labels.idx", y);
  }
  void TearDown() override {
    reset_sharded_inputs();
    fs::remove_all(dir_);
  }

  std::string write(const std::string& name, const Bytes& bytes) {
    std::string path = (dir_ / name).string();
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  // The example index a features row of the IDX files holds (its first value is 6i, times scale).
  static int64_t example_of(const Tensor& features, int64_t row, float scale = 1.f) {
    return static_cast<int64_t>(std::lround(features.data<float>()[row * 6] / scale)) / 6;
  }

  // Raw attributes of a node, for the error cases ShardedInput cannot express.
  Attrs attrs(int64_t replica, int64_t replicas, int64_t global_batch = 4) const {
    return {{"format", std::string("idx")}, {"features", images_}, {"labels", labels_},
            {"global_batch", global_batch}, {"replica", replica}, {"num_replicas", replicas},
            {"seed", int64_t{-1}}, {"drop_remainder", false}, {"scale", 1.0},
            {"source", std::string("raw")}, {"example_shape", Shape{2, 3}}};
  }

  fs::path dir_;
  std::string images_, labels_;
};

TEST(ShardRows, SplitsLikeTheFormula) {
  for (int64_t n : {0, 1, 2, 7, 10, 33}) {
    for (int64_t r = 1; r <= 5; ++r) {
      int64_t next = 0;
      for (int64_t i = 0; i < r; ++i) {
        RowRange rr = shard_rows(n, r, i);
        EXPECT_EQ(rr.start, next) << n << " " << r << " " << i;
        EXPECT_EQ(rr.count, n / r + (i < n % r ? 1 : 0));
        next += rr.count;
      }
      EXPECT_EQ(next, n);
    }
  }
  EXPECT_EQ(shard_rows(10, 4, 1).start, 3);
  EXPECT_EQ(shard_rows(10, 4, 3).start, 8);
  EXPECT_EQ(shard_rows(2, 4, 3).count, 0);
  EXPECT_EQ(batches_per_epoch(10, 4, false), 3);
  EXPECT_EQ(batches_per_epoch(10, 4, true), 2);
  EXPECT_EQ(batches_per_epoch(8, 4, false), 2);
  EXPECT_EQ(batches_per_epoch(3, 4, true), 0);
}

TEST_F(ShardedInputTest, HeadersReadWithoutData) {
  ArrayHeader h = read_idx_header(images_);
  EXPECT_EQ(h.dtype, uint8);
  EXPECT_EQ(h.shape, (Shape{kN, 2, 3}));
  save_npy((dir_ / "x.npy").string(), constant(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{3, 2}));
  ArrayHeader n = read_npy_header((dir_ / "x.npy").string());
  EXPECT_EQ(n.dtype, float32);
  EXPECT_EQ(n.shape, (Shape{3, 2}));
  auto in = data::ShardedInput::idx(images_, labels_, 4);
  EXPECT_EQ(in.num_examples(), kN);
  EXPECT_EQ(in.example_shape(), (Shape{2, 3}));
  EXPECT_EQ(in.batches_per_epoch(), 3);
  EXPECT_EQ(in.drop_remainder(true).batches_per_epoch(), 2);
}

// Three replicas, global batch 4 over 10 examples: batches of 4, 4, 2 rows; the last one leaves
// replica 2 without rows. Two epochs.
TEST_F(ShardedInputTest, ReplicasReadTheirRowsOfEachGlobalBatch) {
  const float scale = 0.5f;
  auto in = data::ShardedInput::idx(images_, labels_, 4).scale(scale);
  const int64_t R = 3;
  for (int64_t step = 0; step < 6; ++step) {
    const int64_t b = step % 3, begin = b * 4, global = std::min<int64_t>(4, kN - begin);
    float weights = 0;
    for (int64_t r = 0; r < R; ++r) {
      std::vector<Tensor> out = in.read(r, R);
      ASSERT_EQ(out.size(), 3u);
      const RowRange rows = shard_rows(global, R, r);
      EXPECT_EQ(out[0].dtype(), float32);
      EXPECT_EQ(out[0].shape(), (Shape{rows.count, 2, 3})) << "step " << step << " replica " << r;
      EXPECT_EQ(out[1].dtype(), int32);
      EXPECT_EQ(out[1].shape(), (Shape{rows.count}));
      EXPECT_EQ(out[2].shape(), Shape{});
      EXPECT_FLOAT_EQ(out[2].item<float>(), static_cast<float>(rows.count) / static_cast<float>(global));
      weights += out[2].item<float>();
      std::vector<float> f = out[0].to_vector<float>();
      std::vector<int32_t> l = out[1].to_vector<int32_t>();
      for (int64_t i = 0; i < rows.count; ++i) {
        const int64_t example = begin + rows.start + i;
        for (int k = 0; k < 6; ++k) EXPECT_FLOAT_EQ(f[i * 6 + k], static_cast<float>(6 * example + k) * scale);
        EXPECT_EQ(l[i], example % 7);
      }
    }
    EXPECT_FLOAT_EQ(weights, 1.f) << "step " << step;
  }
  EXPECT_EQ(in.position(0), (ShardedPosition{2, 0}));
}

TEST_F(ShardedInputTest, MoreReplicasThanRowsGiveEmptyShards) {
  auto in = data::ShardedInput::idx(images_, labels_, 2);
  std::vector<Tensor> out = in.read(3, 4);
  EXPECT_EQ(out[0].shape(), (Shape{0, 2, 3}));
  EXPECT_EQ(out[1].shape(), (Shape{0}));
  EXPECT_EQ(out[2].item<float>(), 0.f);
  EXPECT_EQ(in.read(1, 4)[1].to_vector<int32_t>(), (std::vector<int32_t>{1}));
}

TEST_F(ShardedInputTest, ShuffledEpochsVisitEveryExampleOnceInADeterministicOrder) {
  const int64_t R = 2, G = 3;  // batches of 3, 3, 3, 1
  auto sequence = [&](data::ShardedInput in, int64_t epochs) {
    std::vector<std::vector<int64_t>> per_epoch;
    for (int64_t e = 0; e < epochs; ++e) {
      std::vector<int64_t> seen;
      for (int64_t b = 0; b < in.batches_per_epoch(); ++b)
        for (int64_t r = 0; r < R; ++r) {
          Tensor f = in.read(r, R)[0];
          for (int64_t i = 0; i < f.shape()[0]; ++i) seen.push_back(example_of(f, i));
        }
      per_epoch.push_back(seen);
    }
    return per_epoch;
  };
  auto a = sequence(data::ShardedInput::idx(images_, labels_, G).shuffle(7), 3);
  auto b = sequence(data::ShardedInput::idx(images_, labels_, G).shuffle(7), 3);
  auto c = sequence(data::ShardedInput::idx(images_, labels_, G).shuffle(8), 1);
  EXPECT_EQ(a, b) << "same seed, same order";
  EXPECT_NE(a[0], c[0]) << "another seed, another order";
  EXPECT_NE(a[0], a[1]) << "each epoch is reshuffled";
  EXPECT_NE(a[1], a[2]);
  std::vector<int64_t> identity(kN);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(a[0], identity);
  for (size_t e = 0; e < a.size(); ++e) {
    EXPECT_EQ(a[e], epoch_order(kN, 7, static_cast<int64_t>(e))) << "the documented order, epoch " << e;
    std::vector<int64_t> sorted = a[e];
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, identity) << "every example exactly once in epoch " << e;
  }
  EXPECT_EQ(epoch_order(kN, -1, 3), identity);
  EXPECT_EQ(epoch_order(1000, 1, 0), epoch_order(1000, 1, 0));
}

// Every process must compute the same order, whatever its build or standard library: the
// expected values come from a separate Python transcription of the algorithm documented in
// runtime/sharded_input.{h,cpp} (splitmix64, unbiased draws, Fisher-Yates from the end).
TEST(EpochOrder, IsPinned) {
  EXPECT_EQ(epoch_order(8, 42, 0), (std::vector<int64_t>{6, 7, 4, 0, 1, 2, 5, 3}));
  EXPECT_EQ(epoch_order(8, 42, 1), (std::vector<int64_t>{7, 0, 3, 6, 2, 1, 5, 4}));
  EXPECT_EQ(epoch_order(10, 7, 0), (std::vector<int64_t>{0, 9, 5, 2, 7, 4, 8, 6, 1, 3}));
}

TEST_F(ShardedInputTest, DropRemainderGivesStaticShapesAndFullBatches) {
  auto in = data::ShardedInput::idx(images_, labels_, 4).drop_remainder(true);
  auto traced = function([&]() { return in.read(1, 3); });
  for (int step = 0; step < 5; ++step) {
    std::vector<Tensor> out = traced();
    EXPECT_EQ(out[0].shape(), (Shape{1, 2, 3}));
    EXPECT_FLOAT_EQ(out[2].item<float>(), 0.25f);
    const int64_t b = step % 2;
    EXPECT_EQ(example_of(out[0], 0), b * 4 + 2);
  }
  // The node's shapes are known when the graph is built.
  Graph g;
  {
    GraphScope scope(g);
    std::vector<Tensor> sym = in.read(2, 3);
    EXPECT_EQ(sym[0].shape(), (Shape{1, 2, 3}));
    EXPECT_EQ(sym[1].shape(), (Shape{1}));
  }
}

TEST_F(ShardedInputTest, EagerAndTracedReadTheSame) {
  auto eager = data::ShardedInput::idx(images_, labels_, 4).shuffle(3).scale(1.0 / 255).source("eager");
  auto graph = data::ShardedInput::idx(images_, labels_, 4).shuffle(3).scale(1.0 / 255).source("graph");
  auto f = function([&]() { return graph.read(1, 2); });
  for (int step = 0; step < 7; ++step) {
    std::vector<Tensor> e = eager.read(1, 2);
    std::vector<Tensor> t = f();
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(e[0].shape(), t[0].shape()) << "step " << step;
    EXPECT_EQ(e[0].to_vector<float>(), t[0].to_vector<float>());
    EXPECT_EQ(e[1].to_vector<int32_t>(), t[1].to_vector<int32_t>());
    EXPECT_EQ(e[2].item<float>(), t[2].item<float>());
  }
  EXPECT_EQ(eager.position(1), graph.position(1));
  EXPECT_EQ(graph.position(1), (ShardedPosition{2, 1}));
}

TEST_F(ShardedInputTest, NpyFilesCastLabelsToInt32) {
  std::vector<double> x(kN * 4);
  std::vector<int64_t> y(kN);
  for (int64_t i = 0; i < kN; ++i) {
    for (int k = 0; k < 4; ++k) x[i * 4 + k] = static_cast<double>(10 * i + k);
    y[i] = 1000 + i;
  }
  const std::string xp = (dir_ / "x.npy").string(), yp = (dir_ / "y.npy").string();
  save_npy(xp, constant(x, Shape{kN, 4}));
  save_npy(yp, constant(y, Shape{kN}));
  auto in = data::ShardedInput::npy(xp, yp, 5).scale(2);
  EXPECT_EQ(in.example_shape(), (Shape{4}));
  in.read(0, 2);  // rows 0..2 of batch 0
  std::vector<Tensor> out = in.read(1, 2);  // rows 3, 4
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{60, 62, 64, 66, 80, 82, 84, 86}));
  EXPECT_EQ(out[1].to_vector<int32_t>(), (std::vector<int32_t>{1003, 1004}));
  EXPECT_FLOAT_EQ(out[2].item<float>(), 0.4f);

  save_npy((dir_ / "big.npy").string(), constant(std::vector<int64_t>(kN, int64_t{1} << 40), Shape{kN}));
  try {
    data::ShardedInput::npy(xp, (dir_ / "big.npy").string(), 5).read(0, 1);
    ADD_FAILURE() << "no error for int64 labels beyond int32";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("big.npy"), std::string::npos) << e.what();
  }
}

TEST_F(ShardedInputTest, PositionsCanBeSetAndQueried) {
  auto in = data::ShardedInput::idx(images_, labels_, 4).source("resumed");
  EXPECT_EQ(in.position(), (ShardedPosition{0, 0}));
  in.set_position(0, 5);  // 3 batches per epoch: batch 5 is batch 2 of epoch 1
  EXPECT_EQ(in.position(), (ShardedPosition{0, 5})) << "no file read yet: kept as given";
  std::vector<Tensor> out = in.read(0, 2);  // the short batch: examples 8, 9
  EXPECT_EQ(out[1].to_vector<int32_t>(), (std::vector<int32_t>{8 % 7}));
  EXPECT_EQ(in.position(0), (ShardedPosition{2, 0}));
  EXPECT_EQ(in.position(1), (ShardedPosition{1, 2})) << "a replica that has not read starts where it was set";
  in.set_position(4, 1);  // moves existing cursors too
  EXPECT_EQ(in.position(0), (ShardedPosition{4, 1}));
  EXPECT_EQ(example_of(in.read(0, 2)[0], 0), 4);
  EXPECT_EQ(example_of(in.read(1, 2)[0], 0), 6);
  EXPECT_EQ(in.position(1), (ShardedPosition{4, 2}));
  EXPECT_THROW(in.set_position(-1, 0), InvalidArgument);
  EXPECT_THROW(in.set_position(0, -2), InvalidArgument);
  EXPECT_EQ(sharded_input_position("never-used"), (ShardedPosition{0, 0}));
}

TEST_F(ShardedInputTest, AGraphCarriesTheStartToProcessesThatHaveNotRead) {
  auto in = data::ShardedInput::idx(images_, labels_, 4).source("carried");
  in.set_position(0, 4);  // 3 batches per epoch: batch 1 of epoch 1
  const Attrs attrs = in.node_attrs(1, 2);
  EXPECT_EQ(attrs.get<int64_t>("start_batch"), 4);
  reset_sharded_inputs();  // as a task that has never read the source
  static const OpDef& op = op_def("ReadShardedBatch");
  (void)dispatch(op, {}, attrs);
  EXPECT_EQ(sharded_input_position("carried", 1), (ShardedPosition{1, 2}));
  // Once the process has read the source, the attribute no longer moves its cursors.
  (void)dispatch(op, {}, attrs);
  EXPECT_EQ(sharded_input_position("carried", 1), (ShardedPosition{2, 0}));
  EXPECT_EQ(data::ShardedInput::idx(images_, labels_, 4).source("fresh").node_attrs(0, 1).find("start_batch"), nullptr);
}

TEST_F(ShardedInputTest, ReplicasOfOneProcessReadConcurrently) {
  auto in = data::ShardedInput::idx(images_, labels_, 4).shuffle(5);
  const int64_t R = 4, steps = 60;
  std::vector<std::vector<int64_t>> got(R);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < R; ++r)
    threads.emplace_back([&, r] {
      for (int64_t s = 0; s < steps; ++s) {
        Tensor f = in.read(r, R)[0];
        for (int64_t i = 0; i < f.shape()[0]; ++i) got[r].push_back(example_of(f, i));
      }
    });
  for (auto& t : threads) t.join();
  for (int64_t r = 0; r < R; ++r) {
    std::vector<int64_t> want;
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t e = s / 3, b = s % 3, begin = b * 4, global = std::min<int64_t>(4, kN - begin);
      const std::vector<int64_t> order = epoch_order(kN, 5, e);
      const RowRange rows = shard_rows(global, R, r);
      for (int64_t i = 0; i < rows.count; ++i) want.push_back(order[begin + rows.start + i]);
    }
    EXPECT_EQ(got[r], want) << "replica " << r;
  }
}

template <class E>
void expect_error(const std::function<void()>& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const E& e) {
    for (const std::string& s : fragments)
      EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << "'" << s << "' missing from: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error: " << e.what();
  }
}

TEST_F(ShardedInputTest, MissingFilesAreNotFoundNamingThem) {
  const std::string missing = (dir_ / "missing.idx").string();
  expect_error<NotFound>([&] { data::ShardedInput::idx(missing, labels_, 4).read(0, 1); }, {missing});
  expect_error<NotFound>([&] { data::ShardedInput::idx(images_, missing, 4).num_examples(); }, {missing});
  // The kernel, for a node built with its example shape (as on a task other than the chief).
  Attrs a = attrs(0, 1);
  a.set("labels", missing);
  a.set("example_shape", Shape{2, 3});
  expect_error<NotFound>([&] { dispatch(op_def("ReadShardedBatch"), {}, a); }, {missing});
  expect_error<NotFound>([&] { data::ShardedInput::npy(missing, labels_, 4).num_examples(); }, {missing});
}

TEST_F(ShardedInputTest, MismatchedCountsNameBothFiles) {
  Bytes y = idx_header(0x08, {kN - 1});
  for (int64_t i = 0; i < kN - 1; ++i) y.push_back(1);
  const std::string short_labels = write("short.idx", y);
  expect_error<InvalidArgument>([&] { data::ShardedInput::idx(images_, short_labels, 4).num_examples(); },
                                {images_, short_labels});
  Attrs a = attrs(0, 1);
  a.set("labels", short_labels);
  expect_error<InvalidArgument>([&] { dispatch(op_def("ReadShardedBatch"), {}, a); }, {images_, short_labels});
}

TEST_F(ShardedInputTest, BadAttributesFailWhenTheGraphIsBuilt) {
  const OpDef& op = op_def("ReadShardedBatch");
  auto with = [&](const std::string& name, AttrValue v) {
    Attrs a = attrs(0, 2);
    a.set(name, std::move(v));
    return a;
  };
  const std::vector<std::pair<Attrs, std::string>> bad = {
      {with("replica", int64_t{2}), "replica 2 is out of range"},
      {with("replica", int64_t{-1}), "replica -1"},
      {with("num_replicas", int64_t{0}), "num_replicas"},
      {with("global_batch", int64_t{0}), "global_batch"},
      {with("format", std::string("csv")), "unknown format 'csv'"},
      {with("seed", int64_t{-5}), "seed"},
      {with("source", std::string()), "source"},
      {with("scale", std::nan("")), "scale"},
      {with("labels_dtype", int64), "labels_dtype"},
  };
  for (const auto& [a, fragment] : bad) {
    expect_error<InvalidArgument>([&] { dispatch(op, {}, a); }, {"[read_sharded_batch]", fragment});
    Graph g;  // at graph-building time, before anything runs
    expect_error<InvalidArgument>([&] {
      GraphScope scope(g);
      dispatch(op, {}, a);
    }, {"read_sharded_batch", fragment});
  }
  expect_error<InvalidArgument>([&] { data::ShardedInput::idx(images_, labels_, 0); }, {"global_batch"});
  expect_error<InvalidArgument>([&] { data::ShardedInput::idx(images_, labels_, 4).shuffle(-3); }, {"seed"});
  auto in = data::ShardedInput::idx(images_, labels_, 4);
  expect_error<InvalidArgument>([&] { in.read(3, 3); }, {"replica 3"});
}

// Shape inference reads the example shape from the node, never from the files: building or
// loading a graph opens nothing (a FIFO here would block until a writer came).
TEST_F(ShardedInputTest, ShapeInferenceOpensNoFile) {
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Attrs a = attrs(0, 2);
  a.set("features", fifo);
  a.set("labels", fifo);
  Graph g;
  {
    GraphScope scope(g);
    std::vector<Tensor> out = dispatch(op_def("ReadShardedBatch"), {}, a);
    EXPECT_EQ(out[0].shape(), (Shape{-1, 2, 3}));
  }
  const std::string saved = (dir_ / "fifo_graph.capnp").string();
  g.save(saved);
  EXPECT_NO_THROW(Graph::load(saved));
  Attrs without;
  for (const auto& [name, value] : attrs(0, 2))
    if (name != "example_shape") without.set(name, value);
  Graph h;
  expect_error<InvalidArgument>([&] {
    GraphScope scope(h);
    dispatch(op_def("ReadShardedBatch"), {}, without);
  }, {"example_shape"});
  // At run time the kernel refuses the FIFO at once rather than wait on it.
  expect_error<InvalidArgument>([&] { dispatch(op_def("ReadShardedBatch"), {}, a); }, {fifo, "not a regular file"});
}

TEST_F(ShardedInputTest, MalformedFilesAreDataLossNamingThem) {
  Bytes cut = idx_header(0x08, {kN, 2, 3});
  cut.resize(cut.size() + 7, 1);
  const std::string truncated = write("truncated.idx", cut);
  expect_error<DataLoss>([&] { data::ShardedInput::idx(truncated, labels_, 4).read(0, 1); }, {truncated, "truncated"});
  const std::string garbage = write("garbage.npy", Bytes{'n', 'o', 't', ' ', 'n', 'p', 'y'});
  expect_error<DataLoss>([&] { data::ShardedInput::npy(garbage, garbage, 4).num_examples(); }, {garbage});
  // A header cut short: the header-only reader reports it too.
  save_npy((dir_ / "ok.npy").string(), constant(std::vector<float>{1, 2}, Shape{2}));
  std::string bytes;
  {
    std::ifstream f(dir_ / "ok.npy", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  const std::string cut_header = write("cut.npy", Bytes(bytes.begin(), bytes.begin() + 30));
  expect_error<DataLoss>([&] { read_npy_header(cut_header); }, {cut_header});
}

TEST_F(ShardedInputTest, OneSourceOneSpec) {
  auto a = data::ShardedInput::idx(images_, labels_, 4).source("shared");
  auto b = data::ShardedInput::idx(images_, labels_, 5).source("shared");
  a.read(0, 1);
  expect_error<InvalidArgument>([&] { b.read(0, 1); }, {"source 'shared'"});
  // A copy names the same source and shares the cursor.
  data::ShardedInput copy = a;
  copy.read(0, 1);
  EXPECT_EQ(a.position(), (ShardedPosition{0, 2}));
}

TEST(FashionMnist, ReadsAShardOfTheRealFiles) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  const std::string images = dir + "/train-images-idx3-ubyte.gz", labels = dir + "/train-labels-idx1-ubyte.gz";
  if (!fs::exists(images) || !fs::exists(labels))
    GTEST_SKIP() << "Fashion-MNIST not installed at " << dir << " (Debian's dataset-fashion-mnist)";
  auto in = data::ShardedInput::idx(images, labels, 100).scale(1.0 / 255).source("fashion");
  EXPECT_EQ(in.num_examples(), 60000);
  EXPECT_EQ(in.batches_per_epoch(), 600);
  std::vector<Tensor> out = in.read(1, 3);  // rows 34 .. 66 of the first batch
  auto [x, y] = data::load_idx(images, labels);
  EXPECT_EQ(out[0].shape(), (Shape{33, 28, 28}));
  std::vector<float> f = out[0].to_vector<float>();
  std::vector<uint8_t> px = x.to_vector<uint8_t>();
  std::vector<uint8_t> ly = y.to_vector<uint8_t>();
  std::vector<int32_t> l = out[1].to_vector<int32_t>();
  for (int64_t i = 0; i < 33; ++i) {
    EXPECT_EQ(l[i], ly[34 + i]);
    for (int64_t k = 0; k < 784; k += 97) EXPECT_FLOAT_EQ(f[i * 784 + k], static_cast<float>(px[(34 + i) * 784 + k]) / 255.f);
  }
  EXPECT_FLOAT_EQ(out[2].item<float>(), 0.33f);
  reset_sharded_inputs();
}

}  // namespace
}  // namespace weft
