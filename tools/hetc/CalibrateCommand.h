// `hetc calibrate`: measures this machine for the cost model and writes it as the target "host".
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace hetc::tool {

struct CalibrateArguments {
  std::string out;      // empty: calibratedHostTargetPath()
  unsigned threads = 0; // the most threads measured (0: every core this process may use)
  bool quick = false;   // shorter measurements (tests, a first look)
  bool json = false;
};

void addCalibrateOptions(CLI::App &command, CalibrateArguments &args);

// Prints the measurements on stdout and writes the target file; failures throw
// std::runtime_error with the one-line message.
int calibrateCommand(const CalibrateArguments &args);

} // namespace hetc::tool
