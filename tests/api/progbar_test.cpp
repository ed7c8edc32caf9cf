// utils::Progbar writing to a file: one plain line per epoch when not interactive.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "weft/weft.h"

namespace weft {
namespace {

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

size_t count(const std::string& s, char c) { return static_cast<size_t>(std::count(s.begin(), s.end(), c)); }

TEST(Progbar, NonInteractiveWritesOneLineAtTheEnd) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    utils::Progbar bar(5, "Epoch 1/2", f, /*interactive=*/0);
    for (int64_t step = 1; step < 5; ++step) {
      bar.update(step, {{"loss", 1.0 / step}});
      EXPECT_EQ(contents(f), "") << "nothing before the end, step " << step;
      std::fseek(f, 0, SEEK_END);
    }
    bar.update(5, {{"loss", 0.123456}, {"accuracy", 0.9}});
    bar.update(5, {{"loss", 0.5}});  // after the end: nothing more
  }
  std::string out = contents(f);
  std::fclose(f);
  EXPECT_EQ(count(out, '\n'), 1u) << out;
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(count(out, '\r'), 0u);
  EXPECT_EQ(out.find('\033'), std::string::npos) << "no terminal escapes in a file";
  EXPECT_EQ(out.rfind("Epoch 1/2", 0), 0u) << out;
  EXPECT_NE(out.find("5/5"), std::string::npos) << out;
  EXPECT_NE(out.find("loss: 0.1235"), std::string::npos) << out;
  EXPECT_NE(out.find("accuracy: 0.9000"), std::string::npos) << out;
  EXPECT_EQ(out.find("0.5000"), std::string::npos) << out;
}

TEST(Progbar, DefaultsToNonInteractiveForAFile) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  utils::Progbar bar(3, "", f);
  bar.update(1);
  bar.update(2);
  bar.update(3);
  std::string out = contents(f);
  std::fclose(f);
  EXPECT_EQ(count(out, '\n'), 1u) << out;
  EXPECT_EQ(out.rfind("3/3", 0), 0u) << out;
}

TEST(Progbar, InteractiveRedrawsInPlaceAndEndsTheLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  utils::Progbar bar(4, "T", f, /*interactive=*/1);
  bar.update(1, {{"loss", 2.0}});
  bar.update(4, {{"loss", 1.0}});
  std::string out = contents(f);
  std::fclose(f);
  EXPECT_EQ(count(out, '\n'), 1u) << out;
  EXPECT_EQ(out.back(), '\n');
  EXPECT_GE(count(out, '\r'), 1u);
  EXPECT_NE(out.find("4/4 [==============================]"), std::string::npos) << out;
}

}  // namespace
}  // namespace weft
