#include "runtime/sampling/StopStrings.h"

#include <algorithm>

namespace hetc {

StopStrings::StopStrings(std::vector<std::string> stops) {
  size_t longest = 0;
  for (std::string &stop : stops)
    if (!stop.empty()) {
      longest = std::max(longest, stop.size());
      stops_.push_back(std::move(stop));
    }
  held_.reserve(2 * longest + 64);
}

bool StopStrings::push(std::string_view piece, std::string &out) {
  if (stopped_)
    return true;
  if (stops_.empty()) {
    out.append(piece);
    return false;
  }
  held_.append(piece);
  // Everything before held_ was released because no stop string could begin there, so a match
  // lies inside held_.
  size_t first = std::string::npos;
  for (const std::string &stop : stops_)
    first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    out.append(held_, 0, first);
    held_.clear();
    stopped_ = true;
    return true;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string &stop : stops_)
    for (size_t length = std::min(stop.size() - 1, held_.size()); length > hold; --length)
      if (held_.compare(held_.size() - length, length, stop, 0, length) == 0) {
        hold = length;
        break;
      }
  out.append(held_, 0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return false;
}

void StopStrings::finish(std::string &out) {
  if (!stopped_)
    out.append(held_);
  held_.clear();
}

} // namespace hetc
