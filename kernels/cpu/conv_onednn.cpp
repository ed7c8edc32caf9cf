#include "kernels/cpu/conv_onednn.h"

#include <omp.h>

#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

namespace weft::cpu {

namespace {

enum class Pass { kForward, kBackwardData, kBackwardWeights };

// Everything a primitive depends on.
struct Key {
  Pass pass;
  std::array<int64_t, 9> dims;        // n h w c kh kw f oh ow
  std::array<int64_t, 8> window;      // strides, dilations, pads top bottom left right
  int threads;
  auto tie() const { return std::tie(pass, dims, window, threads); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Entry {
  dnnl::primitive primitive;
  size_t scratchpad_bytes = 0;
  bool usable = false;  // false: oneDNN offers only its reference; weft's runs instead
};

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// oneDNN's "ref:" implementations are plain loops, slower than weft's im2col and GEMM.
bool worth_using(const dnnl::primitive_desc_base& pd) {
  const char* impl = pd.impl_info_str();
  return impl && std::strncmp(impl, "ref", 3) != 0;
}

using dnnl::memory;

struct Descs {
  memory::desc src, weights, dst;
  memory::dims strides, dilates, pad_l, pad_r;
};

Descs descs_of(const ConvParams& p) {
  const auto f32 = memory::data_type::f32;
  // Logical dims in oneDNN's order (N C H W, O I H W); the formats say weft's layouts, NHWC
  // images and [kh, kw, in, out] filters, so no data is reordered.
  return {memory::desc({p.n, p.c, p.h, p.w}, f32, memory::format_tag::nhwc),
          memory::desc({p.f, p.c, p.kh, p.kw}, f32, memory::format_tag::hwio),
          memory::desc({p.n, p.f, p.oh, p.ow}, f32, memory::format_tag::nhwc),
          {p.win.stride_h, p.win.stride_w},
          {p.win.dilation_h - 1, p.win.dilation_w - 1},  // oneDNN counts the gaps: 0 is undilated
          {p.g.pad_top, p.g.pad_left},
          {p.g.pad_bottom, p.g.pad_right}};
}

dnnl::primitive_attr user_scratchpad() {
  // The scratchpad comes with each call, so concurrent calls of one cached primitive share none.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

Entry make_entry(Pass pass, const ConvParams& p) {
  const Descs d = descs_of(p);
  const auto algo = dnnl::algorithm::convolution_direct;
  const dnnl::primitive_attr attr = user_scratchpad();
  Entry e;
  try {
    const dnnl::convolution_forward::desc fwd(dnnl::prop_kind::forward_training, algo, d.src, d.weights, d.dst,
                                              d.strides, d.dilates, d.pad_l, d.pad_r);
    const dnnl::convolution_forward::primitive_desc fwd_pd(fwd, attr, cpu_engine());
    if (pass == Pass::kForward) {
      e.usable = worth_using(fwd_pd);
      e.scratchpad_bytes = fwd_pd.scratchpad_desc().get_size();
      e.primitive = dnnl::convolution_forward(fwd_pd);
    } else if (pass == Pass::kBackwardData) {
      const dnnl::convolution_backward_data::desc bwd(algo, d.src, d.weights, d.dst, d.strides, d.dilates, d.pad_l,
                                                      d.pad_r);
      const dnnl::convolution_backward_data::primitive_desc pd(bwd, attr, cpu_engine(), fwd_pd);
      e.usable = worth_using(pd);
      e.scratchpad_bytes = pd.scratchpad_desc().get_size();
      e.primitive = dnnl::convolution_backward_data(pd);
    } else {
      const dnnl::convolution_backward_weights::desc bwd(algo, d.src, d.weights, d.dst, d.strides, d.dilates,
                                                         d.pad_l, d.pad_r);
      const dnnl::convolution_backward_weights::primitive_desc pd(bwd, attr, cpu_engine(), fwd_pd);
      e.usable = worth_using(pd);
      e.scratchpad_bytes = pd.scratchpad_desc().get_size();
      e.primitive = dnnl::convolution_backward_weights(pd);
    }
  } catch (const dnnl::error&) {
    e = Entry{};  // no implementation for this problem: weft's reference computes it
  }
  return e;
}

// Primitives per problem and thread count, made once: a layer's shapes repeat every step.
// Bounded: a program that feeds ever new shapes starts again from empty rather than grow.
class PrimitiveCache {
 public:
  std::shared_ptr<const Entry> get(const Key& key, Pass pass, const ConvParams& p) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = entries_.find(key); it != entries_.end()) return it->second;
    }
    // Made outside the lock (oneDNN's JIT takes milliseconds); two threads may both make one.
    auto entry = std::make_shared<const Entry>(make_entry(pass, p));
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= kMaxEntries) entries_.clear();
    return entries_.emplace(key, entry).first->second;
  }

 private:
  static constexpr size_t kMaxEntries = 256;
  std::mutex mu_;
  std::map<Key, std::shared_ptr<const Entry>> entries_;
};

PrimitiveCache& cache() {
  static PrimitiveCache c;
  return c;
}

bool run(Pass pass, ThreadPool& pool, const ConvParams& p, const float* src, const float* weights, const float* dst,
         float* out) {
  // oneDNN's problem descriptions want every dimension at least 1; empty problems are the
  // reference's (it fills zeros or does nothing).
  if (p.n < 1 || p.c < 1 || p.f < 1 || p.h < 1 || p.w < 1) return false;
  const int threads = ThreadPool::in_worker() ? 1 : pool.num_threads();
  omp_set_num_threads(threads);
  const Key key{pass,
                {p.n, p.h, p.w, p.c, p.kh, p.kw, p.f, p.oh, p.ow},
                {p.win.stride_h, p.win.stride_w, p.win.dilation_h, p.win.dilation_w, p.g.pad_top, p.g.pad_bottom,
                 p.g.pad_left, p.g.pad_right},
                threads};
  const std::shared_ptr<const Entry> e = cache().get(key, pass, p);
  if (!e->usable) return false;
  const Descs d = descs_of(p);
  dnnl::engine& engine = cpu_engine();
  std::vector<uint8_t> scratch(e->scratchpad_bytes);
  // oneDNN's memory objects take non-const pointers; the inputs are only read.
  auto mem = [&](const memory::desc& md, const float* ptr) { return memory(md, engine, const_cast<float*>(ptr)); };
  std::unordered_map<int, memory> args;
  if (!scratch.empty())
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(memory::desc({static_cast<memory::dim>(scratch.size())},
                                                          memory::data_type::u8, memory::format_tag::x),
                                             engine, scratch.data()));
  switch (pass) {
    case Pass::kForward:
      args.emplace(DNNL_ARG_SRC, mem(d.src, src));
      args.emplace(DNNL_ARG_WEIGHTS, mem(d.weights, weights));
      args.emplace(DNNL_ARG_DST, mem(d.dst, out));
      break;
    case Pass::kBackwardData:
      args.emplace(DNNL_ARG_DIFF_SRC, mem(d.src, out));
      args.emplace(DNNL_ARG_WEIGHTS, mem(d.weights, weights));
      args.emplace(DNNL_ARG_DIFF_DST, mem(d.dst, dst));
      break;
    case Pass::kBackwardWeights:
      args.emplace(DNNL_ARG_SRC, mem(d.src, src));
      args.emplace(DNNL_ARG_DIFF_WEIGHTS, mem(d.weights, out));
      args.emplace(DNNL_ARG_DIFF_DST, mem(d.dst, dst));
      break;
  }
  dnnl::stream stream(engine);
  e->primitive.execute(stream, args);
  stream.wait();
  return true;
}

}  // namespace

bool onednn_conv2d(ThreadPool& pool, const ConvParams& p, const float* x, const float* filter, float* y) {
  return run(Pass::kForward, pool, p, x, filter, nullptr, y);
}

bool onednn_conv2d_backprop_input(ThreadPool& pool, const ConvParams& p, const float* filter, const float* dy,
                                  float* dx) {
  return run(Pass::kBackwardData, pool, p, nullptr, filter, dy, dx);
}

bool onednn_conv2d_backprop_filter(ThreadPool& pool, const ConvParams& p, const float* x, const float* dy,
                                   float* dfilter) {
  return run(Pass::kBackwardWeights, pool, p, x, nullptr, dy, dfilter);
}

}  // namespace weft::cpu
