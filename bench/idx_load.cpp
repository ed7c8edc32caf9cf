// IDX loading speed against the floor of the same work, in one run:
//   a header that declares gigabytes, over a file of a few hundred bytes  vs  opening and reading
//     that file (the rejection must cost about as much as looking at it: nothing of the declared
//     size is allocated or scanned)
//   Fashion-MNIST's training set, gzip                                   vs  gunzipping both files
//   the same images uncompressed, 47 MB                                  vs  fread of the file
// The unit test (tests/api/idx_test.cpp) checks what these loads return; how long they take is
// measured here, where a slow shared machine cannot fail a build.
#include <stdlib.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "weft/weft.h"

using namespace weft;
using weft::bench::fmt;

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

Bytes header(unsigned char type, const std::vector<uint32_t>& dims) {
  Bytes b = {0, 0, type, static_cast<unsigned char>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(d >> s));
  return b;
}

Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void write(const std::string& path, const Bytes& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

void write_gz(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

// Every byte of a file through zlib, which reads plain files as they are: the floor of read_idx.
size_t gunzip(const std::string& path, std::vector<char>& buffer) {
  gzFile f = gzopen(path.c_str(), "rb");
  size_t total = 0;
  int n;
  while ((n = gzread(f, buffer.data(), static_cast<unsigned>(buffer.size()))) > 0) total += static_cast<size_t>(n);
  gzclose(f);
  return total;
}

size_t fread_all(const std::string& path, std::vector<char>& buffer) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  size_t total = 0, n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), f)) > 0) total += n;
  std::fclose(f);
  return total;
}

bool rejects(const std::string& path) {
  try {
    data::read_idx(path);
  } catch (const DataLoss&) {
    return true;
  }
  return false;
}

}  // namespace

int main() {
  std::vector<weft::bench::Row> rows;
  std::string tmpl = (fs::temp_directory_path() / "weft_bench_idx_XXXXXX").string();
  if (!mkdtemp(tmpl.data())) {
    std::perror("mkdtemp");
    return 1;
  }
  const fs::path dir = tmpl;
  std::vector<char> buffer(1 << 20);
  std::printf("weft IDX loading benchmark\n");

  {  // headers that lie: 8 GiB of uint8, and 2^40 float64
    const std::vector<std::pair<std::string, Bytes>> lies = {
        {"8 GiB uint8", header(0x08, {1u << 16, 1u << 16, 2}) + Bytes(100, 1)},
        {"2^40 float64", header(0x0E, {1u << 20, 1u << 20}) + Bytes(100, 1)},
    };
    for (const auto& [what, bytes] : lies) {
      for (bool gz : {false, true}) {
        const std::string path = (dir / ("lie" + std::string(gz ? ".gz" : ""))).string();
        gz ? write_gz(path, bytes) : write(path, bytes);
        if (!rejects(path)) {
          std::fprintf(stderr, "read_idx accepted %s\n", path.c_str());
          return 1;
        }
        const int calls = 2000;
        double w = bench::seconds_per_call([&] { rejects(path); }, calls);
        double floor = bench::seconds_per_call([&] { gunzip(path, buffer); }, calls);
        rows.push_back({"reject header of " + what + (gz ? ", gzip" : ""), fmt("%.1f us", w * 1e6),
                        "open + read " + fmt("%.1f us", floor * 1e6), fmt("%.2fx", w / floor), "<= 100 us"});
      }
    }
  }

  const std::string fm = "/usr/share/datasets/fashion-mnist";
  const std::string images = fm + "/train-images-idx3-ubyte.gz", labels = fm + "/train-labels-idx1-ubyte.gz";
  if (fs::exists(images) && fs::exists(labels)) {
    double w = bench::seconds_per_call([&] { auto xy = data::load_idx(images, labels); }, 1, 5);
    double floor = bench::seconds_per_call([&] {
      gunzip(images, buffer);
      gunzip(labels, buffer);
    }, 1, 5);
    rows.push_back({"Fashion-MNIST train (60000), gzip", fmt("%.1f ms", w * 1e3),
                    "gunzip " + fmt("%.1f ms", floor * 1e3), fmt("%.2fx", w / floor), "<= 1.5x gunzip"});

    // The same images stored plain: what is left is the copy out of zlib's buffer.
    Tensor x = data::read_idx(images);
    const auto* p = x.data<uint8_t>();
    const std::string plain = (dir / "images-idx3-ubyte").string();
    write(plain, header(0x08, {60000, 28, 28}) + Bytes(p, p + x.size()));
    double wp = bench::seconds_per_call([&] { Tensor t = data::read_idx(plain); }, 1, 5);
    double fp = bench::seconds_per_call([&] { fread_all(plain, buffer); }, 1, 5);
    rows.push_back({"same images, uncompressed (47 MB)", fmt("%.1f ms", wp * 1e3), "fread " + fmt("%.1f ms", fp * 1e3),
                    fmt("%.2fx", wp / fp), "<= 2x fread"});
  } else {
    std::printf("Fashion-MNIST not installed at %s (scripts/setup installs it): its rows are left out\n", fm.c_str());
  }

  fs::remove_all(dir);
  weft::bench::print_table("IDX loading (best of 5 runs)", rows);
  return 0;
}
