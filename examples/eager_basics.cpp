// Eager execution as a TensorFlow 2 user knows it: every op runs the moment it is called and
// returns a concrete tensor that can be printed, inspected and copied out. Each block ports one
// familiar snippet; the TensorFlow original is in the comment above it.
//
//   ./build-release/examples/eager_basics
#include <weft/weft.h>

#include <iostream>
#include <numeric>
#include <vector>

// The label on a line of its own: a multi-line tensor then lines up as it would in Python.
void show(const char* label, const weft::Tensor& t) { std::cout << label << ":\n" << t << "\n"; }

int main() {
  // x = tf.constant([1., 2., 3.]); print(x + 1)
  weft::Tensor x = weft::constant({1.f, 2.f, 3.f});
  show("x + 1", x + 1);
  show("x * x - x / 2", x * x - x / 2);

  // s = tf.constant(3.0, tf.float64); s.dtype; (s * 2).numpy()
  weft::Tensor s = weft::constant(3.0);
  std::cout << "s has rank " << s.rank() << " and dtype " << weft::dtype_name(s.dtype())
            << "; (s * 2).item() = " << (s * 2).item<double>() << "\n";

  // m = tf.constant([[1, 2], [3, 4]])   -> int32, as Python ints become in TensorFlow
  weft::Tensor m = weft::constant({{1, 2}, {3, 4}});
  show("m * 10 + m", m * 10 + m);
  show("cast(m, float32) / 4", weft::cast(m, weft::float32) / 4);

  // v = (x * 10).numpy(); np.sum(v)
  std::vector<float> v = (x * 10).to_vector<float>();
  std::cout << "(x * 10).to_vector<float>() sums to " << std::accumulate(v.begin(), v.end(), 0.f) << "\n";

  // a = tf.constant(np.arange(1., 7.).reshape(2, 3))   -- from any std::vector, row-major
  std::vector<float> data(6);
  std::iota(data.begin(), data.end(), 1.f);
  weft::Tensor a = weft::constant(data, weft::Shape{2, 3});
  show("a", a);

  // tf.matmul(a, b)
  weft::Tensor b = weft::constant({{1.f, 0.f}, {0.f, 1.f}, {1.f, 1.f}});
  show("matmul(a, b)", weft::matmul(a, b));

  // tf.matmul(a, a) raises InvalidArgumentError before anything runs; so does weft.
  try {
    weft::matmul(a, a);
  } catch (const weft::InvalidArgument& e) {
    std::cout << "matmul(a, a) threw InvalidArgument: " << e.what() << "\n";
  }
  return 0;
}
