#include "TorchReference.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <spawn.h>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace hetc::tool {
namespace {

[[noreturn]] void fail(const std::string &message) {
  throw std::runtime_error("--compare-torch: " + message);
}

// "exited with status 1", "was killed by signal 9"
std::string describeExit(int status) {
  if (WIFEXITED(status))
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

} // namespace

std::unique_ptr<TorchReference> TorchReference::start(const TorchReferenceOptions &options) {
  struct stat info;
  if (::stat(options.script.c_str(), &info) != 0 || !S_ISREG(info.st_mode))
    fail("the PyTorch benchmark script " + options.script +
         " does not exist (--torch-script names it)");
  if (::stat(options.modelDir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    fail(options.modelDir + " is not a directory (the model directory models/export.py wrote)");

  int toScript[2], fromScript[2];
  if (::pipe2(toScript, O_CLOEXEC) != 0)
    fail(std::string("cannot create a pipe: ") + std::strerror(errno));
  if (::pipe2(fromScript, O_CLOEXEC) != 0) {
    ::close(toScript[0]);
    ::close(toScript[1]);
    fail(std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  // The script's stdin and stdout are the pipes; its stderr stays ours, so a traceback shows.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, toScript[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fromScript[1], STDOUT_FILENO);
  std::vector<std::string> args = {options.python,
                                   options.script,
                                   "--serve",
                                   "--model-dir",
                                   options.modelDir,
                                   "--threads",
                                   std::to_string(options.threads),
                                   "--dtype",
                                   options.dtype,
                                   "--expect",
                                   options.expect};
  std::vector<char *> argv;
  for (std::string &arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned =
      ::posix_spawnp(&pid, options.python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(toScript[0]);
  ::close(fromScript[1]);
  if (spawned != 0) {
    ::close(toScript[1]);
    ::close(fromScript[0]);
    fail("cannot run the Python interpreter " + options.python +
         " (--python): " + std::strerror(spawned));
  }
  // A script that died must fail a write with EPIPE, not end this process.
  std::signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<TorchReference> reference(new TorchReference());
  reference->pid_ = pid;
  reference->toScript_ = toScript[1];
  reference->fromScript_ = ::fdopen(fromScript[0], "r");
  reference->script_ = options.script;
  if (!reference->fromScript_) {
    ::close(fromScript[0]);
    fail(std::string("cannot read the script's output: ") + std::strerror(errno));
  }
  reference->setup_ = reference->readAnswer("its set-up");
  if (reference->setup_.contains("error"))
    fail(reference->setup_["error"].get<std::string>());
  if (!reference->setup_.value("ready", false))
    fail(options.script + " did not describe its set-up: " + reference->setup_.dump());
  return reference;
}

TorchReference::~TorchReference() {
  if (toScript_ >= 0)
    ::close(toScript_); // end of input: the script returns
  if (fromScript_)
    std::fclose(fromScript_);
  if (pid_ > 0) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

nlohmann::json TorchReference::readAnswer(const char *waitingFor) {
  char *line = nullptr;
  size_t capacity = 0;
  const ssize_t length = ::getline(&line, &capacity, fromScript_);
  std::string text = length > 0 ? std::string(line, static_cast<size_t>(length)) : "";
  std::free(line);
  if (length <= 0) {
    int status = 0;
    pid_t waited;
    while ((waited = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    fail("the PyTorch reference " + script_ + " " +
         (waited > 0 ? describeExit(status) : std::string("ended")) + " before answering with " +
         waitingFor + " (its messages, if any, are above)");
  }
  nlohmann::json answer = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!answer.is_object())
    fail("the PyTorch reference " + script_ +
         " answered something that is not a JSON object: " + text.substr(0, 200));
  return answer;
}

nlohmann::json TorchReference::measure(uint64_t context, uint32_t batch, uint32_t gen) {
  const std::string request =
      std::to_string(context) + " " + std::to_string(batch) + " " + std::to_string(gen) + "\n";
  size_t written = 0;
  while (written < request.size()) {
    const ssize_t n = ::write(toScript_, request.data() + written, request.size() - written);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return readAnswer("a point"); // the script is gone: say how it ended
    written += static_cast<size_t>(n);
  }
  return readAnswer("a point");
}

} // namespace hetc::tool
