// printf-style formatting into a std::string, for the tools' reports.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

namespace hetc::tools {

// Lines longer than 511 characters are cut; the reports' lines are far shorter.
inline std::string format(const char *pattern, ...) {
  char buffer[512];
  va_list args;
  va_start(args, pattern);
  std::vsnprintf(buffer, sizeof(buffer), pattern, args);
  va_end(args);
  return buffer;
}

} // namespace hetc::tools
