// `hetc chat`: a conversation on one sequence, rendered with the model's chat template, its KV
// cache kept between turns (and, with --session, between runs).
#pragma once

#include "SamplingOptions.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace hetc::tool {

struct ChatArguments {
  std::string planPath;
  std::string system;       // the system message; empty: none (or the template's default)
  std::string templateName; // --template: a built-in family; empty: recognised from the plan
  std::string session;      // a file that keeps the conversation between runs
  uint32_t maxNew = 256;    // ids per reply at most
  SamplingOptions sampling; // greedy unless a --temperature above 0
  unsigned threads = 0;
  bool noPin = false;
  std::string device = "auto"; // --device
  bool verbose = false;
};

// Declares the options of the `chat` subcommand.
void addChatOptions(CLI::App &command, ChatArguments &args);

// Reads user messages from stdin, one a line, until EOF or /exit, and prints each reply on stdout
// as it is generated, followed by a newline. Failures throw std::runtime_error with the one-line
// message.
int chatCommand(ChatArguments &args);

} // namespace hetc::tool
