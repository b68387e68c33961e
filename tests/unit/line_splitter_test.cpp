#include "hyrun/process/line_splitter.hpp"

#include <gtest/gtest.h>

#include <random>

namespace hyrun {
namespace {

TEST(LineSplitter, JoinsPiecesIntoWholeLines) {
  LineSplitter s;
  EXPECT_TRUE(s.feed("hel").empty());
  EXPECT_EQ(s.feed("lo\nwor"), std::vector<std::string>{"hello\n"});
  EXPECT_EQ(s.feed("ld\n\nx"), (std::vector<std::string>{"world\n", "\n"}));
  EXPECT_EQ(s.finish(), "x");
  EXPECT_EQ(s.finish(), "");
}

TEST(LineSplitter, CutsOverlongLinesIntoBoundedPieces) {
  LineSplitter s(4);
  EXPECT_EQ(s.feed("abcdefghij\nkl"), (std::vector<std::string>{"abcd", "efgh", "ij\n"}));
  EXPECT_EQ(s.feed("mn\n"), (std::vector<std::string>{"klmn\n"}));  // exactly max_line content fits
}

TEST(LineSplitter, RandomChunkingPreservesEveryByte) {
  std::mt19937 gen(std::random_device{}());
  std::string text;
  for (int i = 0; i < 5000; ++i) text += (gen() % 7 == 0) ? '\n' : static_cast<char>('a' + gen() % 26);
  for (std::size_t max_line : {3u, 17u, 1u << 20}) {
    LineSplitter s(max_line);
    std::string joined;
    for (std::size_t pos = 0; pos < text.size();) {
      const std::size_t n = std::min<std::size_t>(1 + gen() % 50, text.size() - pos);
      for (const auto& piece : s.feed(std::string_view(text).substr(pos, n))) {
        EXPECT_LE(piece.size(), max_line + 1);
        joined += piece;
      }
      pos += n;
    }
    joined += s.finish();
    EXPECT_EQ(joined, text) << "max_line " << max_line;
  }
}

}  // namespace
}  // namespace hyrun
