// A program built only against the installed weft package. It must print a tensor and get an
// InvalidArgument for a bad op; tests/install/check.cmake looks for both lines.
#include <weft/weft.h>

#include <iostream>

int main() {
  weft::Tensor x = weft::constant({1.f, 2.f, 3.f});
  std::cout << x + 1 << "\n";
  try {
    weft::Tensor bad = x + weft::constant({1.f, 2.f});  // (3,) and (2,) do not broadcast
    std::cerr << "expected InvalidArgument, got " << bad << "\n";
    return 1;
  } catch (const weft::InvalidArgument& e) {
    std::cout << "caught InvalidArgument: " << e.what() << "\n";
  }
  return 0;
}
