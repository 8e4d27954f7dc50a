// libFuzzer target for hetc serve's request handling without sockets: raw bytes -> the HTTP
// parser (whole, and again in pieces) -> HttpServer::handle, the dispatch every worker runs, on a
// tiny engine whose batch loop runs as in `hetc serve`.
//
// Input: byte 0 sets the piece size the stream is fed in (1 + b % 64); the rest is what a client
// sends on one connection. Checked beyond "no crash":
// - the requests and the refusal are the same whatever the pieces;
// - a refusal's status is one the parser gives (400, 413, 414, 417, 431, 501, 505), with a message;
// - every response is HTTP/1.x with a status, framed by Content-Length, chunks that add up, or (an
//   HTTP/1.0 stream) the close it announces, and a JSON body (every error) parses as JSON, so no
//   byte a client sent breaks its serialization.
#include "TestPlans.h"

#include "runtime/executor/Engine.h"
#include "runtime/format/Plan.h"
#include "runtime/server/HttpParser.h"
#include "runtime/server/HttpServer.h"
#include "runtime/tokenizer/PlanTokenizer.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unistd.h>

namespace {

using namespace hetc;
using server::HttpRequest;
using server::HttpRequestParser;

[[noreturn]] void failure(const std::string &what) {
  std::fprintf(stderr, "fuzz_http: %s\n", what.c_str());
  std::abort();
}

// GPT-2's byte-level alphabet: every byte is a token (ids 0-255), so any UTF-8 text encodes, and
// ChatML's three control tokens follow.
std::string byteLevelTokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    const int codepoint = printable ? b : next++;
    std::string utf8;
    if (codepoint < 0x80) {
      utf8 += static_cast<char>(codepoint);
    } else {
      utf8 += static_cast<char>(0xC0 | (codepoint >> 6));
      utf8 += static_cast<char>(0x80 | (codepoint & 0x3F));
    }
    vocab[utf8] = b;
  }
  nlohmann::json added = nlohmann::json::array();
  const char *specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int i = 0; i < 3; ++i)
    added.push_back({{"id", 256 + i}, {"content", specials[i]}, {"special", true},
                     {"lstrip", false}, {"rstrip", false}, {"single_word", false},
                     {"normalized", false}});
  nlohmann::json root = {
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  return root.dump();
}

struct Fixture {
  std::unique_ptr<Engine> engine;
  PlanTokenizer tokenizer;
  std::unique_ptr<server::HttpServer> http;
};

// The server, once: a tiny decoder (vocabulary 260, 48 positions, 2 slots), ChatML, one API key.
// Its batch loop and listener run on a thread of their own until the fuzzer exits.
server::HttpServer &fixture() {
  static Fixture *f = [] {
    auto *made = new Fixture;
    test::TinyPlanShape shape;
    shape.vocab = 260;
    shape.max_seq = 48;
    shape.max_batch = 2;
    test::TinyPlan tiny = test::buildTinyPlan(shape);
    char dir[] = "/tmp/hetc-fuzz-http-XXXXXX";
    if (!mkdtemp(dir))
      failure("cannot make a temporary directory");
    const std::string path = std::string(dir) + "/tiny.hplan";
    if (!test::writeTinyPlan(path, tiny).ok())
      failure("cannot write the tiny plan");
    Result<std::unique_ptr<Plan>> plan = Plan::load(path);
    if (!plan.ok())
      failure(plan.message());
    std::shared_ptr<const Plan> shared(std::move(*plan));
    unlink(path.c_str());
    rmdir(dir);
    EngineOptions options;
    options.threads = 1;
    options.pin = false;
    Result<std::unique_ptr<Engine>> engine = Engine::create(shared, options);
    if (!engine.ok())
      failure(engine.message());
    made->engine = std::move(*engine);
    Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::fromJson(byteLevelTokenizer());
    if (!tokenizer.ok())
      failure(tokenizer.message());
    made->tokenizer.tokenizer = std::move(*tokenizer);
    made->tokenizer.eosIds = {258};
    server::ServerOptions serverOptions;
    serverOptions.port = 0;
    serverOptions.modelName = "tiny";
    serverOptions.templateName = "chatml";
    serverOptions.maxQueue = 2;
    serverOptions.apiKeys = {"sk-fuzz"};
    serverOptions.drainTimeout = std::chrono::milliseconds(0);
    made->http = std::make_unique<server::HttpServer>(*made->engine, made->tokenizer,
                                                      serverOptions, "tiny.hplan");
    if (!made->http->bind().ok())
      failure("cannot bind a loopback port");
    std::thread([made] { (void)made->http->serve(); }).detach();
    return made;
  }();
  return *f->http;
}

struct Parsed {
  std::vector<HttpRequest> requests;
  int status = 0;
  std::string message;
};

Parsed parse(std::string_view stream, size_t piece) {
  HttpRequestParser parser(server::HttpLimits{});
  Parsed out;
  auto drain = [&](HttpRequestParser::State state) {
    while (state == HttpRequestParser::State::Complete) {
      out.requests.push_back(parser.take());
      state = parser.advance();
    }
    if (state == HttpRequestParser::State::Failed) {
      out.status = parser.status();
      out.message = parser.message();
    }
  };
  while (!stream.empty() && out.status == 0) {
    const size_t n = std::min(piece, stream.size());
    drain(parser.feed(stream.substr(0, n)));
    stream.remove_prefix(n);
  }
  return out;
}

// A response as a client reads it: its status, and a body that is framed and, for JSON, parses.
void checkResponse(const std::string &raw) {
  if (raw.compare(0, 9, "HTTP/1.1 ") != 0 && raw.compare(0, 9, "HTTP/1.0 ") != 0)
    failure("not an HTTP response: " + raw.substr(0, 40));
  const int status = std::atoi(raw.c_str() + 9);
  if (status < 100 || status > 599)
    failure("status " + std::to_string(status));
  const size_t headEnd = raw.find("\r\n\r\n");
  if (headEnd == std::string::npos)
    failure("a response without the end of its head");
  const std::string head = raw.substr(0, headEnd + 2);
  std::string body = raw.substr(headEnd + 4);
  if (head.find("Transfer-Encoding: chunked\r\n") != std::string::npos) {
    std::string joined;
    size_t at = 0;
    for (;;) {
      const size_t line = body.find("\r\n", at);
      if (line == std::string::npos)
        failure("a chunk without its size line");
      const size_t size = std::strtoull(body.c_str() + at, nullptr, 16);
      if (size == 0)
        break;
      joined += body.substr(line + 2, size);
      at = line + 2 + size + 2;
    }
    body = joined;
  } else if (head.find("Content-Length: ") == std::string::npos) {
    // An HTTP/1.0 stream: the body runs to the close, which the response must announce.
    if (raw.compare(0, 9, "HTTP/1.0 ") != 0 || head.find("Connection: close\r\n") == std::string::npos)
      failure("a response neither chunked, nor with a Content-Length, nor HTTP/1.0 to the close");
  } else {
    const size_t length = head.find("Content-Length: ");
    if (std::strtoull(head.c_str() + length + 16, nullptr, 10) != body.size())
      failure("Content-Length differs from the body's size");
  }
  if (head.find("Content-Type: application/json") != std::string::npos) {
    const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
    if (parsed.is_discarded())
      failure("a JSON response that does not parse: " + body.substr(0, 200));
    if (status >= 400 && !parsed.contains("error"))
      failure("an error response without an error object");
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  server::HttpServer &http = fixture();
  const size_t piece = 1 + data[0] % 64;
  const std::string_view stream(reinterpret_cast<const char *>(data) + 1, size - 1);

  const Parsed whole = parse(stream, stream.size() + 1);
  const Parsed split = parse(stream, piece);
  if (whole.status != split.status || whole.message != split.message ||
      whole.requests.size() != split.requests.size())
    failure("the pieces changed what was parsed");
  for (size_t i = 0; i < whole.requests.size(); ++i)
    if (whole.requests[i].target != split.requests[i].target ||
        whole.requests[i].body != split.requests[i].body ||
        whole.requests[i].headers != split.requests[i].headers)
      failure("the pieces changed request " + std::to_string(i));
  if (whole.status != 0) {
    static const int kStatuses[] = {400, 413, 414, 417, 431, 501, 505};
    if (std::find(std::begin(kStatuses), std::end(kStatuses), whole.status) ==
            std::end(kStatuses) ||
        whole.message.empty())
      failure("refusal " + std::to_string(whole.status) + " '" + whole.message + "'");
  }

  // Each request answered as a worker answers it (a few per input: each may generate).
  for (size_t i = 0; i < whole.requests.size() && i < 3; ++i) {
    std::string out;
    server::HttpResponse response(whole.requests[i], [&out](std::string_view bytes) {
      out.append(bytes);
      return true;
    });
    http.handle(whole.requests[i], response);
    if (!response.finished())
      failure("a request left without a finished response");
    checkResponse(out);
  }
  return 0;
}
