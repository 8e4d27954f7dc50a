// Ends generated text at the first stop string, as the text arrives in pieces: what could still
// be the beginning of a stop string is held back, so a stream never shows part of one, and a stop
// string split across pieces (across tokens) is found all the same.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hetc {

class StopStrings {
public:
  // Empty strings are ignored; with none, every piece passes through at once.
  explicit StopStrings(std::vector<std::string> stops);

  // Appends `piece` and moves to `out` the text that can no longer be part of a stop string.
  // Returns true once a stop string is complete: `out` then ends right before it, and this and
  // every later piece is dropped.
  bool push(std::string_view piece, std::string &out);
  // The text ended without a stop string: moves what was held back to `out`.
  void finish(std::string &out);
  bool stopped() const { return stopped_; }

private:
  std::vector<std::string> stops_;
  std::string held_; // a suffix of the text so far that begins some stop string
  bool stopped_ = false;
};

} // namespace hetc
