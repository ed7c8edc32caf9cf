// A character-level GPT trained on real English text, then sampled: nanoGPT's shakespeare_char
// recipe, on the quotations of Debian's `fortunes` package (/usr/share/games/fortunes, 2.6 MB of
// plain text; scripts/setup installs it). The model is examples/gpt_model.h.
//
//   ./train_gpt                                   # nanoGPT's CPU configuration: 4 layers, 4 heads,
//                                                 # 128 wide, context 64, batch 12, 2000 steps
//   ./train_gpt --config gpu                      # shakespeare_char's: 6 x 6 x 384, 256, batch 64
//                                                 # (the default when the process has a GPU)
//   weft-launch -np 2 ./train_gpt                 # data-parallel: the batch split over 2 tasks
//   ./train_gpt --out run                         # run again: resumes from run/ckpt-<n>
//   ./train_gpt --dtype-policy mixed_bfloat16     # bfloat16 compute, float32 variables (the
//                                                 # default of the GPU configuration)
//   ./train_gpt --dtype-policy mixed_float16      # float16 compute with dynamic loss scaling
//
// Training: AdamW (betas 0.9/0.99, weight decay 0.1 on the matrices only), gradients clipped to
// a global norm of 1, and a cosine schedule from 1e-3 to 1e-4 after 100 warm-up steps, read from
// the optimizer's step counter inside the traced step (so the schedule never retraces). Every
// --eval-interval steps the validation loss (the text's last tenth) is printed and a checkpoint
// written. Expect a validation loss near 1.9 after the 2000 CPU steps (about a minute on two
// cores); the first step's is ln(vocabulary) = 4.6.
//
// Under mixed_float16 the AdamW is wrapped in optim::LossScaleOptimizer: the loss is scaled
// before differentiating, the gradients unscaled, clipped to 1 and applied, and a step whose
// gradients overflow float16 is skipped and the scale halved (gpt::train_step). The progress bar
// shows the loss scale, and checkpoints hold it. Skipped steps do not count as the optimizer's
// steps, so they neither advance the schedule nor count for a resumed run, which starts at the
// number of steps applied.
//
// Sampling: the prompt runs once through the model, then each new character is one decode step
// that reuses every layer's key-value cache, so generating n characters costs O(n) projections.
// When the context is full, the cache is rebuilt from the last half of it (nanoGPT crops to the
// context the same way, but recomputes the whole context for every character).
#include <weft/weft.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpt_model.h"

using namespace weft;

namespace {

struct Options {
  std::string config;  // "cpu" or "gpu"; "" picks by the devices present
  std::string dtype_policy;  // "float32", "mixed_bfloat16" or "mixed_float16"; "" picks by the configuration
  int64_t max_iters = 2000;
  int64_t eval_interval = 250;
  int64_t eval_iters = 20;
  int64_t warmup_iters = 100;
  double learning_rate = 1e-3, min_learning_rate = 1e-4;
  int64_t seed = 1337;
  std::string data = "/usr/share/games/fortunes";
  std::string out;  // checkpoints; "" for none
  int64_t sample_tokens = 500;
  double temperature = 0.8;
  int64_t top_k = 20;
  std::string prompt = "\n";
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw InvalidArgument("missing value after " + a);
      return argv[++i];
    };
    if (a == "--config") o.config = value();
    else if (a == "--dtype-policy") o.dtype_policy = value();
    else if (a == "--max-iters") o.max_iters = std::stoll(value());
    else if (a == "--eval-interval") o.eval_interval = std::stoll(value());
    else if (a == "--eval-iters") o.eval_iters = std::stoll(value());
    else if (a == "--warmup-iters") o.warmup_iters = std::stoll(value());
    else if (a == "--lr") o.learning_rate = std::stod(value());
    else if (a == "--min-lr") o.min_learning_rate = std::stod(value());
    else if (a == "--seed") o.seed = std::stoll(value());
    else if (a == "--data") o.data = value();
    else if (a == "--out") o.out = value();
    else if (a == "--sample-tokens") o.sample_tokens = std::stoll(value());
    else if (a == "--temperature") o.temperature = std::stod(value());
    else if (a == "--top-k") o.top_k = std::stoll(value());
    else if (a == "--prompt") o.prompt = value();
    else
      throw InvalidArgument("unknown argument " + a +
                            " (known: --config cpu|gpu --dtype-policy float32|mixed_bfloat16|mixed_float16 --max-iters --eval-interval --eval-iters --warmup-iters --lr "
                            "--min-lr --seed --data --out --sample-tokens --temperature --top-k --prompt)");
  }
  if (o.config != "" && o.config != "cpu" && o.config != "gpu")
    throw InvalidArgument("--config is cpu or gpu, got " + o.config);
  if (o.dtype_policy != "" && o.dtype_policy != "float32" && o.dtype_policy != "mixed_bfloat16" &&
      o.dtype_policy != "mixed_float16")
    throw InvalidArgument("--dtype-policy is float32, mixed_bfloat16 or mixed_float16, got " + o.dtype_policy);
  if (o.max_iters < 1 || o.eval_interval < 1 || o.eval_iters < 1 || o.top_k < 1 || !(o.temperature > 0))
    throw InvalidArgument("--max-iters, --eval-interval, --eval-iters, --top-k and --temperature must be positive");
  return o;
}

// The text: every file of the fortunes directory in name order, each quotation's "%" separator
// line made a blank line; bytes other than printable ASCII, tab and newline are dropped (a few
// files hold overstruck or Latin-1 characters).
std::string read_text(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto& p = entry.path();
    if (entry.is_regular_file() && !entry.is_symlink() && p.extension() != ".dat" && p.extension() != ".u8")
      files.push_back(p);
  }
  if (files.empty()) throw NotFound("no text in " + dir + " (install Debian's fortunes package: scripts/setup)");
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& p : files) {
    std::ifstream in(p);
    for (std::string line; std::getline(in, line);) {
      if (line == "%") line.clear();
      for (char c : line)
        if ((c >= 32 && c < 127) || c == '\t') text.push_back(c);
      text.push_back('\n');
    }
  }
  return text;
}

// Characters <-> ids: the text's distinct bytes in order.
struct Vocabulary {
  std::vector<char> chars;
  std::array<int32_t, 256> ids{};
  explicit Vocabulary(const std::string& text) {
    std::array<bool, 256> seen{};
    for (unsigned char c : text) seen[c] = true;
    for (int c = 0; c < 256; ++c)
      if (seen[c]) {
        ids[c] = static_cast<int32_t>(chars.size());
        chars.push_back(static_cast<char>(c));
      }
  }
  std::vector<int32_t> encode(const std::string& s) const {
    std::vector<int32_t> out;
    for (unsigned char c : s) {
      if (chars[static_cast<size_t>(ids[c])] != static_cast<char>(c))
        throw InvalidArgument("the character " + std::to_string(c) + " is not in the text's vocabulary");
      out.push_back(ids[c]);
    }
    return out;
  }
};

// A batch of `batch` windows of `block` ids at random offsets, and the same windows one later.
std::pair<Tensor, Tensor> random_batch(const std::vector<int32_t>& data, int64_t batch, int64_t block, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> offset(0, static_cast<int64_t>(data.size()) - block - 1);
  std::vector<int32_t> x(batch * block), y(batch * block);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t at = offset(rng);
    std::copy_n(data.begin() + at, block, x.begin() + b * block);
    std::copy_n(data.begin() + at + 1, block, y.begin() + b * block);
  }
  return {constant(x, Shape{batch, block}), constant(y, Shape{batch, block})};
}

// One character from the last position's logits: the top_k most likely, softened by temperature.
int32_t sample(const Tensor& logits, double temperature, int64_t top_k, std::mt19937_64& rng) {
  std::vector<float> l = cast(logits, float32).to_vector<float>();  // bfloat16 under mixed precision
  std::vector<int32_t> order(l.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  const size_t k = std::min<size_t>(static_cast<size_t>(top_k), l.size());
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  std::vector<double> weights(k);
  for (size_t i = 0; i < k; ++i) weights[i] = std::exp((l[order[i]] - l[order[0]]) / temperature);
  return order[std::discrete_distribution<size_t>(weights.begin(), weights.end())(rng)];
}

}  // namespace

int main(int argc, char** argv) try {
  Cluster cluster = cluster::init(argc, argv);  // tasks other than the chief serve from here
  const Options opt = parse(argc, argv);
  distribute::DataParallel dp(cluster);

  const std::string text = read_text(opt.data);
  const Vocabulary vocab(text);
  const std::vector<int32_t> ids = vocab.encode(text);
  const size_t split = ids.size() * 9 / 10;
  const std::vector<int32_t> train(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(split));
  const std::vector<int32_t> val(ids.begin() + static_cast<std::ptrdiff_t>(split), ids.end());

  bool have_gpu = false;
  for (const auto& d : list_devices()) have_gpu |= d.type == "GPU";
  const bool gpu_config = opt.config == "gpu" || (opt.config.empty() && have_gpu);
  const auto vocab_size = static_cast<int64_t>(vocab.chars.size());
  const gpt::Config config = gpu_config ? gpt::Config::gpu(vocab_size) : gpt::Config::cpu(vocab_size);
  const std::string policy = !opt.dtype_policy.empty() ? opt.dtype_policy : gpu_config ? "mixed_bfloat16" : "float32";
  nn::set_dtype_policy(policy);  // before the model's layers are made
  std::printf("%zu characters of text (%zu for training), vocabulary %lld; %s configuration: %lld layers, %lld heads, "
              "width %lld, context %lld, batch %lld, %s; %d replicas on %d tasks\n",
              ids.size(), train.size(), static_cast<long long>(vocab_size), gpu_config ? "GPU" : "CPU",
              static_cast<long long>(config.layers), static_cast<long long>(config.heads),
              static_cast<long long>(config.width), static_cast<long long>(config.block_size),
              static_cast<long long>(config.batch), policy.c_str(), dp.num_replicas(), cluster.num_tasks());

  random::set_seed(opt.seed);
  gpt::Gpt model(config);
  optim::CosineDecay schedule(opt.learning_rate, std::max<int64_t>(1, opt.max_iters - opt.warmup_iters),
                              opt.min_learning_rate / opt.learning_rate, opt.warmup_iters);
  optim::AdamW optimizer = gpt::adamw(schedule);
  // float16's range needs loss scaling; the scaler steps `optimizer` itself (they share its state).
  std::optional<optim::LossScaleOptimizer> scaler;
  if (policy == "mixed_float16") scaler.emplace(optimizer);

  // Checkpoints hold the model and the optimizer, whose step counter says where to resume (and
  // under mixed_float16 the loss scale).
  std::optional<CheckpointManager> checkpoints;
  if (!opt.out.empty()) {
    std::vector<std::pair<std::string, Trackable>> saved{{"model", model}, {"optimizer", optimizer}};
    if (scaler) {
      saved.emplace_back("loss_scale", scaler->loss_scale_variable());
      saved.emplace_back("loss_scale_good_steps", scaler->good_steps_variable());
    }
    checkpoints.emplace(Checkpoint(std::move(saved)), opt.out, 3);
    const std::string resumed = checkpoints->restore_or_initialize();
    if (!resumed.empty())
      std::printf("resumed from %s at step %lld\n", resumed.c_str(), static_cast<long long>(optimizer.iterations()));
  }

  auto step = dp.function([&](Tensor x, Tensor y) {
    const gpt::StepResult r =
        scaler ? gpt::train_step(model, *scaler, x, y) : gpt::train_step(model, optimizer, x, y);
    return std::make_tuple(r.loss, r.gradient_norm);
  });
  auto evaluate = function([&](Tensor x, Tensor y) { return gpt::loss(model(x, /*training=*/false), y); });
  auto mean_loss = [&](const std::vector<int32_t>& data, std::mt19937_64& rng) {
    double sum = 0;
    for (int64_t i = 0; i < opt.eval_iters; ++i) {
      auto [x, y] = random_batch(data, config.batch, config.block_size, rng);
      sum += evaluate(x, y).item<float>();
    }
    return sum / static_cast<double>(opt.eval_iters);
  };

  for (int64_t iter = optimizer.iterations(); iter < opt.max_iters;) {
    const int64_t end = std::min(opt.max_iters, (iter / opt.eval_interval + 1) * opt.eval_interval);
    utils::Progbar bar(end - iter, "Steps " + std::to_string(iter + 1) + "-" + std::to_string(end) + "/" +
                                       std::to_string(opt.max_iters));
    double loss_sum = 0;
    for (int64_t s = 1; iter < end; ++iter, ++s) {
      // The batches follow from the seed and the step, so a resumed run sees the same ones.
      std::mt19937_64 rng(static_cast<uint64_t>(opt.seed) * 1000003u + static_cast<uint64_t>(iter));
      auto [x, y] = random_batch(train, config.batch, config.block_size, rng);
      auto [loss, norm] = step(x, y);
      loss_sum += loss.item<float>();
      std::vector<std::pair<std::string, double>> shown{
          {"loss", loss_sum / static_cast<double>(s)}, {"grad norm", norm.item<float>()}, {"lr", schedule(iter)}};
      if (scaler) shown.emplace_back("loss scale", scaler->loss_scale());
      bar.update(s, shown);
    }
    std::mt19937_64 eval_rng(static_cast<uint64_t>(opt.seed) + 7);
    const double train_loss = mean_loss(train, eval_rng), val_loss = mean_loss(val, eval_rng);
    std::printf("step %lld: train loss %.4f, val loss %.4f\n", static_cast<long long>(iter), train_loss, val_loss);
    if (checkpoints) std::printf("saved %s\n", checkpoints->save(iter).c_str());
    std::fflush(stdout);  // shown now, also when the output goes to a file
  }

  // Sampling with the key-value caches.
  std::mt19937_64 rng(static_cast<uint64_t>(opt.seed));
  std::vector<int32_t> context = vocab.encode(opt.prompt.empty() ? std::string("\n") : opt.prompt);
  if (static_cast<int64_t>(context.size()) > config.block_size)
    context.erase(context.begin(), context.end() - config.block_size);
  std::vector<nn::KeyValueCache> caches(static_cast<size_t>(config.layers));
  auto prime = [&](const std::vector<int32_t>& prefix) {
    std::fill(caches.begin(), caches.end(), nn::KeyValueCache{});
    const Tensor logits = model.decode(constant(prefix, Shape{1, static_cast<int64_t>(prefix.size())}), caches);
    return slice(logits, {0, static_cast<int64_t>(prefix.size()) - 1, 0}, {1, 1, -1});
  };
  Tensor logits = prime(context);
  std::string generated;
  for (int64_t t = 0; t < opt.sample_tokens; ++t) {
    const int32_t next = sample(logits, opt.temperature, opt.top_k, rng);
    generated.push_back(vocab.chars[static_cast<size_t>(next)]);
    context.push_back(next);
    if (caches[0].length() == config.block_size) {  // full: keep the last half as context
      context.erase(context.begin(), context.end() - config.block_size / 2);
      logits = prime(context);
    } else {
      logits = model.decode(constant(std::vector<int32_t>{next}, Shape{1, 1}), caches);
    }
  }
  std::printf("--- sampled (temperature %.2f, top-k %lld) ---\n%s%s\n", opt.temperature,
              static_cast<long long>(opt.top_k), opt.prompt.c_str(), generated.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_gpt: %s\n", e.what());
  return 1;
}
