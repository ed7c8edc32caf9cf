// libFuzzer's main, for ordinary builds: feeds every file named on the command line (and every
// file under each directory named) to LLVMFuzzerTestOneInput once, so a fuzz target's corpus
// runs as a regression test under whatever sanitizers the build has.
//
//   npy_fuzz tests/fuzz/corpus/npy crash-1234
//   npy_fuzz --mutations=200 tests/fuzz/corpus/npy    # and 200 mutants of each input
//
// --mutations=N also feeds N mutants of every input, made by a fixed generator (the same mutants
// on every run, so a failure reproduces): bytes flipped, set to boundary values, inserted,
// removed, the input cut short or spliced with another. Not libFuzzer's coverage-guided search,
// but new inputs on every parser within the ordinary sanitizer build, at a cost CI can pay
// (scripts/fuzz runs the real fuzzers).
//
// Each input is copied into a buffer of exactly its size, so a read past the end is caught by
// AddressSanitizer as it would be under libFuzzer. Finding no input at all is a failure: a
// regression test over an empty or misplaced corpus would otherwise pass without checking.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// splitmix64: a fixed generator, so the mutants are the same on every machine and run.
uint64_t next(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string mutate(std::string s, const std::vector<std::string>& all, uint64_t& rng) {
  static const unsigned char kBoundary[] = {0x00, 0x01, 0x7f, 0x80, 0xff, '[', '{', '"', '\\', '-'};
  const int edits = 1 + static_cast<int>(next(rng) % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t at = s.empty() ? 0 : next(rng) % s.size();
    switch (next(rng) % 6) {
      case 0: if (!s.empty()) s[at] = static_cast<char>(s[at] ^ (1u << (next(rng) % 8))); break;
      case 1: if (!s.empty()) s[at] = static_cast<char>(kBoundary[next(rng) % sizeof kBoundary]); break;
      case 2: s.insert(at, 1 + next(rng) % 8, static_cast<char>(next(rng))); break;
      case 3: if (!s.empty()) s.erase(at, 1 + next(rng) % 8); break;
      case 4: s.resize(at); break;
      default: {
        const std::string& other = all[next(rng) % all.size()];
        const size_t from = other.empty() ? 0 : next(rng) % other.size();
        s = s.substr(0, at) + other.substr(from);
      }
    }
  }
  return s;
}

void feed(const std::string& bytes) {
  auto buffer = std::make_unique<uint8_t[]>(bytes.size());
  std::copy(bytes.begin(), bytes.end(), buffer.get());
  LLVMFuzzerTestOneInput(buffer.get(), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  long mutations = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).starts_with("--mutations=")) {
      mutations = std::strtol(argv[i] + 12, nullptr, 10);
      continue;
    }
    const fs::path p = argv[i];
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file()) inputs.push_back(e.path());
    } else if (fs::is_regular_file(p)) {
      inputs.push_back(p);
    } else {
      std::fprintf(stderr, "replay: %s is neither a file nor a directory\n", argv[i]);
      return 2;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs (usage: %s FILE_OR_DIR...)\n", argc > 0 ? argv[0] : "replay");
    return 2;
  }
  std::sort(inputs.begin(), inputs.end());
  std::vector<std::string> all;
  for (const fs::path& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
      return 2;
    }
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", p.c_str(), bytes.size());
    feed(bytes);
    all.push_back(std::move(bytes));
  }
  uint64_t rng = 0x5eed;
  for (size_t k = 0; k < all.size(); ++k)
    for (long m = 0; m < mutations; ++m) {
      const uint64_t before = rng;
      const std::string mutant = mutate(all[k], all, rng);
      // Said before it runs: a crash's last line names the mutant (input, number, generator state).
      if (m % 64 == 0 || std::getenv("REPLAY_VERBOSE"))
        std::fprintf(stderr, "replay: mutant %ld of %s (state %llu, %zu bytes)\n", m, inputs[k].c_str(),
                     static_cast<unsigned long long>(before), mutant.size());
      feed(mutant);
    }
  std::fprintf(stderr, "replay: %zu inputs and %ld mutants of each, no crash\n", inputs.size(), mutations);
  return 0;
}
