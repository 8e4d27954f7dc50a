// Stop strings over text that arrives in pieces: the text ends right before the first stop
// string, one split across pieces is found, and nothing released ever holds part of one.
#include "runtime/sampling/StopStrings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hetc {
namespace {

struct Streamed {
  std::string text;
  std::vector<std::string> released; // what each push released
  bool stopped = false;
};

Streamed stream(const std::vector<std::string> &stops, const std::vector<std::string> &pieces) {
  StopStrings matcher(stops);
  Streamed result;
  for (const std::string &piece : pieces) {
    std::string out;
    result.stopped = matcher.push(piece, out);
    result.released.push_back(out);
    result.text += out;
    if (result.stopped)
      break;
  }
  if (!result.stopped) {
    std::string out;
    matcher.finish(out);
    result.text += out;
  }
  return result;
}

TEST(StopStrings, EndsBeforeAStopSplitAcrossPieces) {
  const Streamed s = stream({"\n\nUser:"}, {"Hello", " there.", "\n", "\nUs", "er", ":", " more"});
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "Hello there.");
  // Streaming never showed a byte of the stop string, though its pieces came one by one.
  for (const std::string &released : s.released)
    EXPECT_EQ(released.find('\n'), std::string::npos) << "'" << released << "'";
  EXPECT_EQ(s.released.size(), 6u); // the piece with the last ':' stopped it
}

TEST(StopStrings, APartialMatchThatFailsIsReleased) {
  const Streamed s = stream({"STOP"}, {"ST", "OR", "Y ST", "OP!"});
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "STORY ");
  EXPECT_EQ(s.released[0], "");     // "ST" could begin STOP
  EXPECT_EQ(s.released[1], "STOR"); // no longer
}

TEST(StopStrings, TheEarliestOfSeveralWins) {
  const Streamed s = stream({"world", "lo w"}, {"hello world"});
  EXPECT_EQ(s.text, "hel");
  const Streamed inside = stream({"abcd", "bc"}, {"a", "b", "c", "d"});
  EXPECT_EQ(inside.text, "a");
}

TEST(StopStrings, WithoutAStopEverythingComesOut) {
  const Streamed s = stream({"END"}, {"the ", "E", "N"});
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(s.text, "the EN"); // held back until the end, then released
  EXPECT_EQ(stream({}, {"a", "b"}).text, "ab");
  EXPECT_EQ(stream({""}, {"a", "b"}).text, "ab");
}

TEST(StopStrings, AStopAtTheVeryStart) {
  const Streamed s = stream({"<|end|>"}, {"<|end|>", "after"});
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "");
}

} // namespace
} // namespace hetc
