#include "BenchServeCommand.h"
#include "CommandSupport.h"

#include "runtime/format/Plan.h"
#include "tools/PrintfString.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char **environ;

namespace hetc::tool {

namespace {

using Clock = std::chrono::steady_clock;
using hetc::tools::format;
using nlohmann::json;

double secondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

std::vector<uint32_t> parseLevels(const std::string &text) {
  std::vector<uint32_t> levels;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    char *end = nullptr;
    errno = 0;
    const unsigned long value = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || value == 0 || value > 4096)
      fail("--concurrency '" + text +
           "': expected comma-separated counts of clients from 1 to 4096");
    levels.push_back(static_cast<uint32_t>(value));
  }
  if (levels.empty())
    fail("--concurrency is empty: expected comma-separated counts of clients, e.g. 1,2,4,8");
  return levels;
}

// ---------------------------------------------------------------------------------------------
// The `hetc serve` this run starts: the same binary, a free port, its stderr read until the
// listening line and then kept (its last lines) for the error that names why it stopped.

struct ServerFacts {
  std::string url;   // http://HOST:PORT
  std::string model; // empty when not known yet
  uint32_t slots = 0;
  uint32_t queue = 0;
};

class ServeProcess {
public:
  ServeProcess(const BenchServeArguments &args) {
    std::vector<std::string> argv = {"hetc",   "serve", args.planPath, "--host", "127.0.0.1",
                                     "--port", "0"};
    if (args.threads)
      argv.insert(argv.end(), {"--threads", std::to_string(args.threads)});
    if (args.maxQueue >= 0)
      argv.insert(argv.end(), {"--max-queue", std::to_string(args.maxQueue)});
    if (!args.model.empty())
      argv.insert(argv.end(), {"--model-name", args.model});
    for (const std::string &word : argv)
      command_ += (command_.empty() ? "" : " ") + word;

    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
      fail(std::string("cannot start hetc serve: pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    // Its stdout joins this process's stderr (stdout is the report); its stderr comes here.
    posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    std::vector<char *> cargv;
    for (std::string &word : argv)
      cargv.push_back(word.data());
    cargv.push_back(nullptr);
    const int spawned =
        posix_spawn(&pid_, "/proc/self/exe", &actions, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (spawned != 0) {
      close(fds[0]);
      pid_ = -1;
      fail(std::string("cannot start hetc serve: ") + std::strerror(spawned));
    }
    stderr_ = fds[0];
  }

  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (drain_.joinable())
      drain_.join();
    if (stderr_ >= 0)
      close(stderr_);
  }

  // Reads its stderr until the listening line; fails with its last lines when it exits first or
  // says nothing of the kind within `timeoutSeconds`.
  ServerFacts waitUntilListening(double timeoutSeconds) {
    const Clock::time_point deadline =
        Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeoutSeconds * 1000));
    std::string pending;
    for (;;) {
      size_t newline;
      while ((newline = pending.find('\n')) != std::string::npos) {
        const std::string line = pending.substr(0, newline);
        pending.erase(0, newline + 1);
        if (std::optional<ServerFacts> facts = parseListening(line)) {
          drain_ = std::thread([this] { drainStderr(); });
          return *facts;
        }
        remember(line);
      }
      const double left = secondsBetween(Clock::now(), deadline);
      if (left <= 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
        fail(format("%s: no listening line after %.0f s%s", command_.c_str(), timeoutSeconds,
                    lastLines().c_str()));
      }
      pollfd pfd{stderr_, POLLIN, 0};
      const int ready = poll(&pfd, 1, static_cast<int>(std::min(left, 1.0) * 1000) + 1);
      if (ready < 0 && errno != EINTR)
        fail(std::string("reading hetc serve's stderr: ") + std::strerror(errno));
      if (ready <= 0)
        continue;
      char buffer[4096];
      const ssize_t n = read(stderr_, buffer, sizeof(buffer));
      if (n > 0) {
        pending.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
      // End of its stderr: it exited (or closed stderr) before listening.
      if (!pending.empty())
        remember(pending);
      fail(command_ + " stopped before listening: " + reap() + lastLines());
    }
  }

  // Whether it still runs; once it has exited, `exitDescription()` says how.
  bool running() {
    if (pid_ <= 0)
      return false;
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == 0)
      return true;
    pid_ = -1;
    exit_ = describeStatus(status);
    return false;
  }

  std::string whyStopped() {
    if (drain_.joinable())
      drain_.join();
    return command_ + " " + exit_ + lastLines();
  }

  // SIGTERM, then waits for it (SIGKILL after 30 s); fails unless it exits with code 0.
  void stop() {
    if (!running())
      fail(whyStopped());
    kill(pid_, SIGTERM);
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        pid_ = -1;
        fail(command_ + " did not stop within 30 s of SIGTERM" + lastLines());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      exit_ = describeStatus(status);
      fail(command_ + " " + exit_ + " on SIGTERM" + lastLines());
    }
  }

private:
  static std::optional<ServerFacts> parseListening(const std::string &line) {
    // hetc serve: listening on http://127.0.0.1:PORT (model NAME, S slots, queue Q)
    const std::string marker = "listening on ";
    const size_t at = line.find(marker);
    if (line.rfind("hetc serve:", 0) != 0 || at == std::string::npos)
      return std::nullopt;
    ServerFacts facts;
    const size_t urlStart = at + marker.size();
    const size_t urlEnd = line.find(' ', urlStart);
    facts.url =
        line.substr(urlStart, urlEnd == std::string::npos ? std::string::npos : urlEnd - urlStart);
    const size_t model = line.find("(model ", urlStart);
    if (model != std::string::npos) {
      const size_t slotsComma = line.rfind(" slots");
      const size_t nameEnd =
          slotsComma == std::string::npos ? std::string::npos : line.rfind(", ", slotsComma);
      if (nameEnd != std::string::npos && nameEnd > model + 7) {
        facts.model = line.substr(model + 7, nameEnd - (model + 7));
        facts.slots = static_cast<uint32_t>(std::strtoul(line.c_str() + nameEnd + 2, nullptr, 10));
      }
      const size_t queue = line.find("queue ", model);
      if (queue != std::string::npos)
        facts.queue = static_cast<uint32_t>(std::strtoul(line.c_str() + queue + 6, nullptr, 10));
    }
    return facts;
  }

  static std::string describeStatus(int status) {
    if (WIFEXITED(status))
      return "exited with code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status))
      return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
             strsignal(WTERMSIG(status)) + ")";
    return "stopped";
  }

  std::string reap() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_ = describeStatus(status);
    return exit_;
  }

  void drainStderr() {
    std::string pending;
    char buffer[4096];
    for (;;) {
      const ssize_t n = read(stderr_, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      pending.append(buffer, static_cast<size_t>(n));
      size_t newline;
      while ((newline = pending.find('\n')) != std::string::npos) {
        remember(pending.substr(0, newline));
        pending.erase(0, newline + 1);
      }
    }
    if (!pending.empty())
      remember(pending);
  }

  void remember(const std::string &line) {
    std::lock_guard<std::mutex> lock(linesMutex_);
    lines_.push_back(line);
    if (lines_.size() > 3)
      lines_.pop_front();
  }

  std::string lastLines() {
    std::lock_guard<std::mutex> lock(linesMutex_);
    std::string out;
    for (const std::string &line : lines_)
      out += (out.empty() ? "; its stderr ended: " : " | ") + line;
    return out;
  }

  pid_t pid_ = -1;
  int stderr_ = -1;
  std::string command_;
  std::string exit_ = "is running";
  std::thread drain_;
  std::mutex linesMutex_;
  std::deque<std::string> lines_;
};

// ---------------------------------------------------------------------------------------------
// One streamed completion: the server-sent events of /v1/completions, timed as they arrive.

// Tokens one streamed choice carries, as far as the chunk says: its logprobs' tokens when the
// server sends them, else one for a chunk with text. A server that falls behind puts several
// tokens' text in one chunk, so the request's count is the usage the stream ends with.
uint32_t choiceTokens(const json &choice) {
  if (const auto logprobs = choice.find("logprobs");
      logprobs != choice.end() && logprobs->is_object())
    if (const auto tokens = logprobs->find("tokens");
        tokens != logprobs->end() && tokens->is_array())
      return static_cast<uint32_t>(tokens->size());
  const auto text = choice.find("text");
  return text != choice.end() && text->is_string() && !text->get<std::string>().empty() ? 1 : 0;
}

std::string errorMessage(const std::string &body) {
  const json parsed = json::parse(body, nullptr, false);
  if (parsed.is_object()) {
    const auto error = parsed.find("error");
    if (error != parsed.end() && error->is_object() && error->contains("message") &&
        (*error)["message"].is_string())
      return (*error)["message"].get<std::string>();
    if (error != parsed.end() && error->is_string())
      return error->get<std::string>();
  }
  std::string text = body.substr(0, 200);
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text.empty() ? "(no body)" : text;
}

struct RequestRecord {
  enum class Outcome { Ok, Rejected, Failed };
  Outcome outcome = Outcome::Failed;
  bool sent = false;
  bool broken = false; // no whole HTTP exchange: the connection failed or closed early
  int status = 0;
  std::string error;
  std::string retryAfter;
  uint32_t chunks = 0;      // events that carried text
  uint32_t chunkTokens = 0; // tokens as the chunks count them (choiceTokens)
  int64_t usageTokens = -1; // the usage the stream ends with, when the server sends it
  int64_t usagePrompt = -1;
  uint32_t tokens = 0; // usageTokens when known, else chunkTokens
  std::string finishReason;
  double ttft = std::numeric_limits<double>::quiet_NaN(); // seconds from sending
  double lastToken = std::numeric_limits<double>::quiet_NaN();
  double e2e = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> itl; // seconds between consecutive chunks (shared among a chunk's tokens)

  // Time per output token after the first: (last - first) / (tokens - 1).
  double tpot() const {
    return tokens > 1 ? (lastToken - ttft) / (tokens - 1)
                      : std::numeric_limits<double>::quiet_NaN();
  }
};

class CompletionStream {
public:
  CompletionStream(RequestRecord &record, Clock::time_point sent) : record_(record), sent_(sent) {}

  // Feeds received bytes; false (with record.error) when the stream is malformed or reports an
  // error.
  bool feed(const char *data, size_t size) {
    for (size_t i = 0; i < size; ++i)
      if (data[i] != '\r')
        pending_.push_back(data[i]);
    size_t end;
    while ((end = pending_.find("\n\n")) != std::string::npos) {
      const std::string event = pending_.substr(0, end);
      pending_.erase(0, end + 2);
      if (!onEvent(event))
        return false;
    }
    return true;
  }

  bool done() const { return done_; }

private:
  bool onEvent(const std::string &event) {
    std::string payload;
    std::stringstream lines(event);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("data:", 0) != 0)
        continue; // ": ping" comments, event names, ids
      std::string value = line.substr(5);
      if (!value.empty() && value[0] == ' ')
        value.erase(0, 1);
      payload += (payload.empty() ? "" : "\n") + value;
    }
    if (payload.empty())
      return true;
    if (payload == "[DONE]") {
      done_ = true;
      return true;
    }
    const json chunk = json::parse(payload, nullptr, false);
    if (!chunk.is_object()) {
      record_.error = "a streamed event is not a JSON object: " + payload.substr(0, 120);
      return false;
    }
    if (chunk.contains("error")) {
      record_.error = "the stream reports an error: " + errorMessage(payload);
      return false;
    }
    uint32_t tokens = 0;
    if (const auto choices = chunk.find("choices"); choices != chunk.end() && choices->is_array())
      for (const json &choice : *choices) {
        tokens += choiceTokens(choice);
        const auto finish = choice.find("finish_reason");
        if (finish != choice.end() && finish->is_string())
          record_.finishReason = finish->get<std::string>();
      }
    if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
      const json &counts = *usage;
      if (counts.contains("completion_tokens") && counts["completion_tokens"].is_number_integer())
        record_.usageTokens = counts["completion_tokens"].get<int64_t>();
      if (counts.contains("prompt_tokens") && counts["prompt_tokens"].is_number_integer())
        record_.usagePrompt = counts["prompt_tokens"].get<int64_t>();
    }
    if (tokens == 0)
      return true;
    const Clock::time_point now = Clock::now();
    if (record_.chunks == 0) {
      record_.ttft = secondsBetween(sent_, now);
    } else {
      // A chunk that says it holds several tokens shares its gap among them.
      const double gap = secondsBetween(last_, now) / tokens;
      record_.itl.insert(record_.itl.end(), tokens, gap);
    }
    last_ = now;
    record_.lastToken = secondsBetween(sent_, now);
    record_.chunks += 1;
    record_.chunkTokens += tokens;
    return true;
  }

  RequestRecord &record_;
  Clock::time_point sent_;
  Clock::time_point last_;
  std::string pending_;
  bool done_ = false;
};

// httplib names its errors by enumerator ("Connection", "Read").
std::string describe(httplib::Error error) {
  switch (error) {
  case httplib::Error::Connection:
    return "cannot connect (nothing listens there, or the connection was refused)";
  case httplib::Error::ConnectionTimeout:
    return "the connection timed out";
  case httplib::Error::Read:
    return "reading the answer failed (the connection closed, or --timeout passed)";
  case httplib::Error::Write:
    return "sending the request failed (the connection closed)";
  default:
    return "HTTP client error " + httplib::to_string(error);
  }
}

std::unique_ptr<httplib::Client> makeClient(const std::string &url, double readTimeout) {
  auto client = std::make_unique<httplib::Client>(url);
  if (!client->is_valid())
    fail("--url '" + url + "': expected http://HOST:PORT");
  client->set_connection_timeout(10);
  const auto seconds = static_cast<time_t>(readTimeout);
  client->set_read_timeout(seconds, static_cast<time_t>((readTimeout - seconds) * 1e6));
  client->set_write_timeout(30);
  return client;
}

RequestRecord streamCompletion(const std::string &url, const std::string &body, double timeout) {
  RequestRecord record;
  record.sent = true;
  std::unique_ptr<httplib::Client> client = makeClient(url, timeout);
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/completions";
  request.body = body;
  request.set_header("Content-Type", "application/json");
  request.set_header("Accept", "text/event-stream");
  std::string errorBody;
  const Clock::time_point sent = Clock::now();
  CompletionStream stream(record, sent);
  request.response_handler = [&](const httplib::Response &response) {
    record.status = response.status;
    record.retryAfter = response.get_header_value("Retry-After");
    return true;
  };
  request.content_receiver = [&](const char *data, size_t size, uint64_t, uint64_t) {
    if (record.status != 200) {
      errorBody.append(data, std::min<size_t>(size, 4096));
      return true;
    }
    return stream.feed(data, size);
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  const bool answered = client->send(request, response, error);
  record.e2e = secondsBetween(sent, Clock::now());
  record.tokens =
      record.usageTokens >= 0 ? static_cast<uint32_t>(record.usageTokens) : record.chunkTokens;
  if (record.status == 429) {
    record.outcome = RequestRecord::Outcome::Rejected;
    record.error = errorMessage(errorBody);
    return record;
  }
  if (record.status != 0 && record.status != 200) {
    record.error = format("HTTP %d: ", record.status) + errorMessage(errorBody);
    return record;
  }
  if (!answered) {
    record.broken = error != httplib::Error::Canceled;
    if (record.error.empty())
      record.error = record.status == 0 ? "no answer: " + describe(error)
                                        : "the stream broke off: " + describe(error);
    return record;
  }
  if (!stream.done()) {
    record.broken = true;
    record.error = format("the stream ended without data: [DONE] after %u chunks", record.chunks);
    return record;
  }
  record.outcome = RequestRecord::Outcome::Ok;
  return record;
}

// ---------------------------------------------------------------------------------------------
// The server's own counts: /metrics in Prometheus' text format.

using Metrics = std::map<std::string, double>;

// Unlabelled samples by name; nullopt when /metrics does not answer 200.
std::optional<Metrics> readMetrics(const std::string &url) {
  std::unique_ptr<httplib::Client> client = makeClient(url, 30);
  httplib::Result result = client->Get("/metrics");
  if (!result || result->status != 200)
    return std::nullopt;
  Metrics metrics;
  std::stringstream lines(result->body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#' || line.find('{') != std::string::npos)
      continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos)
      continue;
    char *end = nullptr;
    const double value = std::strtod(line.c_str() + space + 1, &end);
    if (end != line.c_str() + space + 1)
      metrics[line.substr(0, space)] = value;
  }
  return metrics;
}

std::optional<double> metricDelta(const std::optional<Metrics> &before,
                                  const std::optional<Metrics> &after, const std::string &name) {
  if (!before || !after)
    return std::nullopt;
  const auto b = before->find(name), a = after->find(name);
  if (b == before->end() || a == after->end())
    return std::nullopt;
  return a->second - b->second;
}

// ---------------------------------------------------------------------------------------------
// A level of the sweep: `concurrency` clients take requests until `requests` are done.

struct Distribution {
  double p50, p90, p99, mean;
};

double percentile(const std::vector<double> &sorted, double p) {
  if (sorted.empty())
    return std::numeric_limits<double>::quiet_NaN();
  // Linear interpolation between closest ranks (numpy's default).
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(sorted.size() - 1, below + 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (rank - static_cast<double>(below));
}

Distribution distribution(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values)
    sum += v;
  return {percentile(values, 50), percentile(values, 90), percentile(values, 99),
          values.empty() ? std::numeric_limits<double>::quiet_NaN()
                         : sum / static_cast<double>(values.size())};
}

struct LevelReport {
  uint32_t concurrency = 0;
  std::vector<RequestRecord> records;
  double seconds = 0;
  uint64_t promptTokensSent = 0; // 0 with a text prompt: only the server knows
  bool serverGone = false;       // the clients stopped: the server no longer answers
  std::optional<Metrics> before, after;

  uint32_t count(RequestRecord::Outcome outcome) const {
    return static_cast<uint32_t>(
        std::count_if(records.begin(), records.end(),
                      [&](const RequestRecord &r) { return r.outcome == outcome; }));
  }
  uint64_t outputTokens() const {
    uint64_t sum = 0;
    for (const RequestRecord &r : records)
      sum += r.tokens;
    return sum;
  }
  uint64_t usagePromptTokens() const {
    uint64_t sum = 0;
    for (const RequestRecord &r : records)
      sum += r.usagePrompt > 0 ? static_cast<uint64_t>(r.usagePrompt) : 0;
    return sum;
  }
  uint64_t chunks() const {
    uint64_t sum = 0;
    for (const RequestRecord &r : records)
      sum += r.chunks;
    return sum;
  }
  uint64_t okTokens() const {
    uint64_t sum = 0;
    for (const RequestRecord &r : records)
      if (r.outcome == RequestRecord::Outcome::Ok)
        sum += r.tokens;
    return sum;
  }
  Distribution ttft() const {
    return collect([](const RequestRecord &r, std::vector<double> &out) { out.push_back(r.ttft); });
  }
  Distribution itl() const {
    return collect([](const RequestRecord &r, std::vector<double> &out) {
      out.insert(out.end(), r.itl.begin(), r.itl.end());
    });
  }
  Distribution e2e() const {
    return collect([](const RequestRecord &r, std::vector<double> &out) { out.push_back(r.e2e); });
  }
  Distribution tpot() const {
    return collect([](const RequestRecord &r, std::vector<double> &out) {
      if (r.tokens > 1)
        out.push_back(r.tpot());
    });
  }

private:
  template <typename Take> Distribution collect(Take take) const {
    std::vector<double> values;
    for (const RequestRecord &r : records)
      if (r.outcome == RequestRecord::Outcome::Ok && r.chunks > 0)
        take(r, values);
    return distribution(std::move(values));
  }
};

// The server's generation counter may be bumped a moment after the last event is written: reads
// /metrics again (for up to two seconds) while it disagrees with the clients and still moves.
std::optional<Metrics> settledMetrics(const std::string &url, const std::optional<Metrics> &before,
                                      uint64_t clientTokens) {
  std::optional<Metrics> after = readMetrics(url);
  for (int attempt = 0; attempt < 20; ++attempt) {
    const std::optional<double> delta = metricDelta(before, after, "hetc_generation_tokens_total");
    if (!delta || static_cast<uint64_t>(*delta) == clientTokens)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::optional<Metrics> again = readMetrics(url);
    if (metricDelta(after, again, "hetc_generation_tokens_total") == std::optional<double>(0.0)) {
      after = again;
      break;
    }
    after = again;
  }
  return after;
}

struct Workload {
  std::string url;
  std::string model;
  std::string prompt; // text, or empty: ids
  uint32_t promptTokens = 0;
  uint32_t vocab = 0;
  uint32_t maxTokens = 0;
  uint64_t seed = 0;
  double timeout = 0;
  bool logprobs = false;

  // Request `index`'s body; the same index gives the same prompt at every level.
  std::string body(uint32_t index) const {
    // The usage at the end of the stream counts the tokens; logprobs count them per chunk too,
    // but make the server compute whole rows of logits where it would find argmaxes.
    json request = {{"model", model},
                    {"max_tokens", maxTokens},
                    {"temperature", 0},
                    {"stream", true},
                    {"stream_options", {{"include_usage", true}}},
                    {"seed", seed}};
    if (logprobs)
      request["logprobs"] = 0;
    if (!prompt.empty()) {
      request["prompt"] = prompt;
    } else {
      std::mt19937_64 draw(seed * 0x9E3779B97F4A7C15ull + index);
      std::uniform_int_distribution<uint32_t> id(0, vocab - 1);
      std::vector<uint32_t> ids(promptTokens);
      for (uint32_t &value : ids)
        value = id(draw);
      request["prompt"] = ids;
    }
    return request.dump();
  }
};

// `serverAlive` is asked after a request whose connection broke: when the server is gone, the
// clients stop taking requests.
LevelReport runLevel(const Workload &work, uint32_t concurrency, uint32_t requests,
                     const std::function<bool()> &serverAlive) {
  LevelReport level;
  level.concurrency = concurrency;
  level.records.resize(requests);
  std::vector<std::string> bodies(requests);
  for (uint32_t i = 0; i < requests; ++i)
    bodies[i] = work.body(i);
  level.before = readMetrics(work.url);
  std::atomic<uint32_t> next{0};
  std::atomic<bool> serverGone{false};
  std::mutex askMutex;
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> clients;
  for (uint32_t c = 0; c < std::min(concurrency, requests); ++c)
    clients.emplace_back([&] {
      for (uint32_t i = next++; i < requests && !serverGone; i = next++) {
        level.records[i] = streamCompletion(work.url, bodies[i], work.timeout);
        if (level.records[i].broken) {
          std::lock_guard<std::mutex> lock(askMutex);
          if (!serverGone && !serverAlive())
            serverGone = true;
        }
      }
    });
  for (std::thread &client : clients)
    client.join();
  level.seconds = secondsBetween(start, Clock::now());
  level.records.erase(std::remove_if(level.records.begin(), level.records.end(),
                                     [](const RequestRecord &r) { return !r.sent; }),
                      level.records.end());
  level.serverGone = serverGone;
  if (work.prompt.empty())
    level.promptTokensSent = level.records.size() * work.promptTokens;
  if (serverGone)
    return level;
  level.after = settledMetrics(work.url, level.before, level.outputTokens());
  return level;
}

// ---------------------------------------------------------------------------------------------
// The report.

double ms(double seconds) { return seconds * 1e3; }

std::string cell(double value, const char *pattern = "%.1f") {
  return std::isnan(value) ? std::string("-") : format(pattern, value);
}

void printHeader(const ServerFacts &server, const Workload &work, const std::string &requests) {
  std::printf("server %s, model %s", server.url.c_str(), work.model.c_str());
  if (server.slots)
    std::printf(", %u slots, queue %u", server.slots, server.queue);
  std::printf("\n");
  if (work.prompt.empty())
    std::printf("prompts: %u token ids each (drawn below %u, seed %llu); ", work.promptTokens,
                work.vocab, static_cast<unsigned long long>(work.seed));
  else
    std::printf("prompt: %zu bytes of text; ", work.prompt.size());
  std::printf("max_tokens %u, temperature 0, streamed%s; requests per level: %s\n", work.maxTokens,
              work.logprobs ? " with logprobs" : "", requests.c_str());
  std::printf("%5s %5s %5s %5s %9s %7s %23s %23s %15s %15s %15s\n", "conc", "ok", "429", "fail",
              "out tok/s", "req/s", "TTFT p50/p90/p99 ms", "ITL p50/p90/p99 ms", "TPOT p50/p99 ms",
              "E2E p50/p99 ms", "tokens cli/srv");
  std::fflush(stdout);
}

std::string triple(const Distribution &d) {
  return cell(ms(d.p50)) + "/" + cell(ms(d.p90)) + "/" + cell(ms(d.p99));
}

void printLevel(const LevelReport &level) {
  const Distribution ttft = level.ttft(), itl = level.itl(), tpot = level.tpot(), e2e = level.e2e();
  const std::optional<double> server =
      metricDelta(level.before, level.after, "hetc_generation_tokens_total");
  const std::string tokens =
      std::to_string(level.outputTokens()) + "/" +
      (server ? std::to_string(static_cast<uint64_t>(*server)) : std::string("-"));
  std::printf("%5u %5u %5u %5u %9.1f %7.2f %23s %23s %15s %15s %15s\n", level.concurrency,
              level.count(RequestRecord::Outcome::Ok),
              level.count(RequestRecord::Outcome::Rejected),
              level.count(RequestRecord::Outcome::Failed),
              static_cast<double>(level.outputTokens()) / level.seconds,
              level.count(RequestRecord::Outcome::Ok) / level.seconds, triple(ttft).c_str(),
              triple(itl).c_str(), (cell(ms(tpot.p50)) + "/" + cell(ms(tpot.p99))).c_str(),
              (cell(ms(e2e.p50)) + "/" + cell(ms(e2e.p99))).c_str(), tokens.c_str());
  std::fflush(stdout);
}

json msJson(const Distribution &d) {
  return {{"p50", ms(d.p50)}, {"p90", ms(d.p90)}, {"p99", ms(d.p99)}, {"mean", ms(d.mean)}};
}

json optionalJson(const std::optional<double> &value) {
  return value ? json(static_cast<int64_t>(*value)) : json(nullptr);
}

json levelJson(const LevelReport &level) {
  json finish = json::object();
  json requests = json::array();
  for (const RequestRecord &r : level.records) {
    if (r.outcome == RequestRecord::Outcome::Ok)
      finish[r.finishReason.empty() ? "none" : r.finishReason] =
          finish.value(r.finishReason.empty() ? "none" : r.finishReason, 0) + 1;
    json one = {{"outcome", r.outcome == RequestRecord::Outcome::Ok         ? "ok"
                            : r.outcome == RequestRecord::Outcome::Rejected ? "rejected"
                                                                            : "failed"},
                {"status", r.status},
                {"tokens", r.tokens},
                {"chunks", r.chunks},
                {"chunk_tokens", r.chunkTokens},
                {"finish_reason", r.finishReason.empty() ? json(nullptr) : json(r.finishReason)},
                {"ttft_ms", ms(r.ttft)},
                {"e2e_ms", ms(r.e2e)}};
    one["usage_completion_tokens"] = r.usageTokens >= 0 ? json(r.usageTokens) : json(nullptr);
    one["usage_prompt_tokens"] = r.usagePrompt >= 0 ? json(r.usagePrompt) : json(nullptr);
    if (!r.error.empty())
      one["error"] = r.error;
    if (!r.retryAfter.empty())
      one["retry_after"] = r.retryAfter;
    requests.push_back(std::move(one));
  }
  const std::optional<double> generated =
      metricDelta(level.before, level.after, "hetc_generation_tokens_total");
  return {
      {"concurrency", level.concurrency},
      {"requests", level.records.size()},
      {"ok", level.count(RequestRecord::Outcome::Ok)},
      {"rejected", level.count(RequestRecord::Outcome::Rejected)},
      {"failed", level.count(RequestRecord::Outcome::Failed)},
      {"duration_s", level.seconds},
      {"output_tokens", level.outputTokens()},
      {"ok_output_tokens", level.okTokens()},
      {"chunks", level.chunks()},
      {"prompt_tokens_sent", level.promptTokensSent ? json(level.promptTokensSent) : json(nullptr)},
      {"usage_prompt_tokens", level.usagePromptTokens()},
      {"output_tokens_per_s", static_cast<double>(level.outputTokens()) / level.seconds},
      {"requests_per_s", level.count(RequestRecord::Outcome::Ok) / level.seconds},
      {"ttft_ms", msJson(level.ttft())},
      {"itl_ms", msJson(level.itl())},
      {"tpot_ms", msJson(level.tpot())},
      {"e2e_ms", msJson(level.e2e())},
      {"finish_reasons", finish},
      {"server",
       {{"metrics", level.before.has_value() && level.after.has_value()},
        {"generation_tokens", optionalJson(generated)},
        {"prompt_tokens",
         optionalJson(metricDelta(level.before, level.after, "hetc_prompt_tokens_total"))},
        {"requests_rejected",
         optionalJson(metricDelta(level.before, level.after, "hetc_requests_rejected_total"))},
        {"requests_finished",
         optionalJson(metricDelta(level.before, level.after, "hetc_requests_finished_total"))}}},
      {"tokens_match",
       generated ? json(static_cast<uint64_t>(*generated) == level.outputTokens()) : json(nullptr)},
      {"per_request", requests}};
}

// ---------------------------------------------------------------------------------------------

// The served model and, when the server says, its vocabulary (/v1/models).
struct ModelFacts {
  std::string name;
  uint32_t vocab = 0;
};

ModelFacts askModels(const std::string &url, const std::string &wanted) {
  std::unique_ptr<httplib::Client> client = makeClient(url, 30);
  httplib::Result result = client->Get("/v1/models");
  if (!result)
    fail("cannot reach the server at " + url + ": " + describe(result.error()));
  if (result->status != 200)
    fail(format("%s/v1/models answers HTTP %d: ", url.c_str(), result->status) +
         errorMessage(result->body));
  const json models = json::parse(result->body, nullptr, false);
  if (!models.is_object() || !models.contains("data") || !models["data"].is_array() ||
      models["data"].empty())
    fail(url + "/v1/models lists no model");
  for (const json &model : models["data"]) {
    if (!model.is_object() || !model.contains("id") || !model["id"].is_string())
      continue;
    const std::string id = model["id"].get<std::string>();
    if (!wanted.empty() && id != wanted)
      continue;
    ModelFacts facts{id, 0};
    for (const char *field : {"vocab_size", "n_vocab"})
      if (model.contains(field) && model[field].is_number_unsigned())
        facts.vocab = model[field].get<uint32_t>();
    if (model.contains("meta") && model["meta"].is_object() && model["meta"].contains("n_vocab") &&
        model["meta"]["n_vocab"].is_number_unsigned())
      facts.vocab = model["meta"]["n_vocab"].get<uint32_t>();
    return facts;
  }
  fail(url + "/v1/models does not list the model '" + wanted + "'");
}

uint32_t planVocabulary(const std::string &planPath) {
  return loadPlan(planPath)->def().model()->vocab();
}

// Slots and queue places from /health, when the server says (hetc serve does).
void askHealth(ServerFacts &server) {
  std::unique_ptr<httplib::Client> client = makeClient(server.url, 30);
  httplib::Result result = client->Get("/health");
  if (!result || result->status != 200)
    return;
  const json health = json::parse(result->body, nullptr, false);
  if (health.is_object() && health.contains("slots") && health["slots"].is_number_unsigned() &&
      health.contains("queue_capacity") && health["queue_capacity"].is_number_unsigned()) {
    server.slots = health["slots"].get<uint32_t>();
    server.queue = health["queue_capacity"].get<uint32_t>();
  }
}

// Whether the server still answers (any HTTP status counts).
bool answers(const std::string &url) {
  std::unique_ptr<httplib::Client> client = makeClient(url, 10);
  return static_cast<bool>(client->Get("/health"));
}

std::string firstError(const LevelReport &level) {
  for (const RequestRecord &r : level.records)
    if (r.outcome == RequestRecord::Outcome::Failed)
      return r.error;
  return "";
}

} // namespace

void addBenchServeOptions(CLI::App &command, BenchServeArguments &args) {
  CLI::Option *plan = command.add_option(
      "plan", args.planPath, "Plan file: starts `hetc serve PLAN --port 0` for the run");
  CLI::Option *url = command.add_option(
      "--url", args.url, "Benchmark the server already running at http://HOST:PORT instead");
  plan->excludes(url);
  command
      .add_option("--concurrency", args.concurrency,
                  "Comma-separated numbers of concurrent clients, one level of the sweep each")
      ->capture_default_str();
  command.add_option("--requests", args.requests,
                     "Requests per level (default: 4 x the level's concurrency)");
  CLI::Option *promptTokens =
      command
          .add_option("--prompt-tokens", args.promptTokens,
                      "Prompt length in tokens, sent as token ids drawn from the vocabulary")
          ->capture_default_str()
          ->check(CLI::Range(1u, 1u << 20));
  command.add_option("--prompt", args.prompt, "Send this text as every prompt instead")
      ->excludes(promptTokens);
  command.add_option("--max-tokens", args.maxTokens, "max_tokens of every request")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  command.add_option("--seed", args.seed, "Draws the prompt ids; sent as every request's seed")
      ->capture_default_str();
  command.add_option("--vocab", args.vocab,
                     "Draw prompt ids below this (default: the vocabulary /v1/models or the plan "
                     "gives)");
  command.add_option("--model", args.model,
                     "The model field (default: the first model /v1/models lists)");
  command.add_option("--json", args.jsonPath, "Also write the report as JSON to this file");
  command.add_flag("--logprobs", args.logprobs,
                   "Ask logprobs: 0, whose tokens say how many tokens each chunk carries (the "
                   "server then computes whole rows of logits)");
  command
      .add_option("--timeout", args.timeout,
                  "Seconds a request may wait for a byte before it counts as failed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command.add_option("--threads", args.threads, "hetc serve --threads (with a plan)");
  command.add_option("--max-queue", args.maxQueue, "hetc serve --max-queue (with a plan)")
      ->check(CLI::NonNegativeNumber);
  command
      .add_option("--start-timeout", args.startTimeout,
                  "Seconds to wait for the hetc serve it starts to listen")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

int benchServeCommand(const BenchServeArguments &args) {
  if (args.planPath.empty() == args.url.empty())
    fail("bench-serve: give a PLAN (to start hetc serve) or --url http://HOST:PORT");
  if (!args.url.empty() && (args.threads || args.maxQueue >= 0))
    fail("bench-serve: --threads and --max-queue are options of the hetc serve started for a "
         "PLAN, not of a server at --url");
  const std::vector<uint32_t> levels = parseLevels(args.concurrency);
  if (!args.jsonPath.empty()) {
    std::ofstream probe(args.jsonPath, std::ios::app);
    if (!probe)
      fail("--json " + args.jsonPath + ": cannot write there");
  }

  std::unique_ptr<ServeProcess> serve;
  ServerFacts server;
  uint32_t vocab = args.vocab;
  if (!args.planPath.empty()) {
    // Refuse a bad plan here, in one line, rather than through the server's exit.
    const uint32_t planVocab = planVocabulary(args.planPath);
    if (vocab == 0)
      vocab = planVocab;
    serve = std::make_unique<ServeProcess>(args);
    server = serve->waitUntilListening(args.startTimeout);
  } else {
    server.url = args.url;
    while (!server.url.empty() && server.url.back() == '/')
      server.url.pop_back();
    if (server.url.size() > 3 && server.url.compare(server.url.size() - 3, 3, "/v1") == 0)
      server.url.resize(server.url.size() - 3);
    if (server.url.rfind("http://", 0) != 0 && server.url.rfind("https://", 0) != 0)
      fail("--url '" + args.url + "': expected http://HOST:PORT");
  }

  Workload work;
  work.url = server.url;
  const ModelFacts model = askModels(server.url, args.model);
  if (!serve)
    askHealth(server);
  work.model = model.name;
  work.prompt = args.prompt;
  work.promptTokens = args.promptTokens;
  work.vocab = vocab ? vocab : model.vocab;
  work.maxTokens = args.maxTokens;
  work.seed = args.seed;
  work.timeout = args.timeout;
  work.logprobs = args.logprobs;
  if (work.prompt.empty() && work.vocab == 0)
    fail(server.url + "/v1/models does not give the vocabulary size: give --vocab N (prompt ids "
                      "are drawn below it) or --prompt TEXT");

  std::string requestsText;
  for (uint32_t c : levels)
    requestsText +=
        (requestsText.empty() ? "" : ",") + std::to_string(args.requests ? args.requests : 4 * c);
  printHeader(server, work, requestsText);

  json report = {{"server",
                  {{"url", server.url},
                   {"model", work.model},
                   {"started", serve != nullptr},
                   {"slots", server.slots ? json(server.slots) : json(nullptr)},
                   {"queue", server.slots ? json(server.queue) : json(nullptr)}}},
                 {"prompt_tokens", work.prompt.empty() ? json(work.promptTokens) : json(nullptr)},
                 {"prompt_text", work.prompt.empty() ? json(nullptr) : json(work.prompt)},
                 {"vocab", work.vocab ? json(work.vocab) : json(nullptr)},
                 {"max_tokens", work.maxTokens},
                 {"temperature", 0},
                 {"seed", work.seed},
                 {"logprobs", work.logprobs},
                 {"levels", json::array()}};
  std::string chunkNote;
  for (uint32_t concurrency : levels) {
    const uint32_t requests = args.requests ? args.requests : 4 * concurrency;
    const std::function<bool()> alive = [&] {
      return serve ? serve->running() : answers(server.url);
    };
    LevelReport level = runLevel(work, concurrency, requests, alive);
    if (level.count(RequestRecord::Outcome::Failed) > 0) {
      const std::string cause = firstError(level);
      const uint32_t failed = level.count(RequestRecord::Outcome::Failed);
      const std::string counts =
          format("(%u of the %zu requests sent failed, the first: ", failed, level.records.size());
      if (serve && !serve->running())
        fail(format("the server stopped during concurrency %u ", concurrency) + counts + cause +
             "): " + serve->whyStopped());
      if (!serve && (level.serverGone || !answers(server.url)))
        fail(format("the server at %s stopped answering during concurrency %u ", server.url.c_str(),
                    concurrency) +
             counts + cause + ")");
      if (level.count(RequestRecord::Outcome::Ok) == 0 &&
          level.count(RequestRecord::Outcome::Rejected) == 0)
        fail(format("every request of concurrency %u failed, the first: ", concurrency) + cause);
      std::cerr << "hetc bench-serve: warning: " << failed << " of " << requests
                << " requests at concurrency " << concurrency << " failed, the first: " << cause
                << '\n';
    }
    printLevel(level);
    const std::optional<double> generated =
        metricDelta(level.before, level.after, "hetc_generation_tokens_total");
    if (generated && static_cast<uint64_t>(*generated) != level.outputTokens()) {
      std::cerr << "hetc bench-serve: warning: at concurrency " << concurrency
                << " the clients counted " << level.outputTokens()
                << " tokens, the server's /metrics " << static_cast<uint64_t>(*generated) << '\n';
    }
    if (!work.logprobs && level.chunks() < level.outputTokens())
      chunkNote += format("%s%u: %llu chunks for %llu tokens", chunkNote.empty() ? "" : ", ",
                          concurrency, static_cast<unsigned long long>(level.chunks()),
                          static_cast<unsigned long long>(level.outputTokens()));
    report["levels"].push_back(levelJson(level));
  }
  if (!chunkNote.empty())
    std::printf("ITL is between chunks, and the server sent some chunks of several tokens "
                "(concurrency %s); --logprobs counts each chunk's tokens\n",
                chunkNote.c_str());
  if (!report["levels"].empty() && !report["levels"][0]["server"]["metrics"].get<bool>())
    std::cerr << "hetc bench-serve: " << server.url
              << "/metrics gives no hetc_generation_tokens_total: the clients' token counts are "
                 "not cross-checked\n";

  if (serve)
    serve->stop();
  if (!args.jsonPath.empty()) {
    std::ofstream out(args.jsonPath, std::ios::trunc);
    out << report.dump(2) << '\n';
    if (!out)
      fail("--json " + args.jsonPath + ": cannot write there");
  }
  return 0;
}

} // namespace hetc::tool
