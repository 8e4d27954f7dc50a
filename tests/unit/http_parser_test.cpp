// The server's HTTP/1.1 parser and response writer, without sockets: every request read the same
// whatever the split of its bytes, pipelined requests in order, limits refused before the bytes
// they limit are kept, and the framings that smuggle requests past proxies refused.
#include "runtime/server/HttpParser.h"
#include "runtime/server/HttpResponse.h"

#include <gtest/gtest.h>

#include <random>

namespace hetc::server {
namespace {

using State = HttpRequestParser::State;

struct Parsed {
  std::vector<HttpRequest> requests;
  int failure = 0; // the status of a refusal, 0 when none
  std::string message;
};

// Feeds `bytes` in pieces of the given sizes (cycled), taking each complete request.
Parsed parse(std::string_view bytes, const std::vector<size_t> &pieces, HttpLimits limits = {}) {
  HttpRequestParser parser(limits);
  Parsed out;
  size_t k = 0;
  auto drain = [&](State state) {
    while (state == State::Complete) {
      out.requests.push_back(parser.take());
      state = parser.advance();
    }
    if (state == State::Failed) {
      out.failure = parser.status();
      out.message = parser.message();
    }
    return state;
  };
  while (!bytes.empty() && out.failure == 0) {
    const size_t n = std::min(bytes.size(), std::max<size_t>(1, pieces[k++ % pieces.size()]));
    drain(parser.feed(bytes.substr(0, n)));
    bytes.remove_prefix(n);
  }
  return out;
}

// The same result for the bytes whole, a byte at a time and in random pieces.
Parsed parseEverySplit(std::string_view bytes, HttpLimits limits = {}) {
  const Parsed whole = parse(bytes, {bytes.size()}, limits);
  std::mt19937 random(7);
  std::vector<std::vector<size_t>> splits = {{1}, {2, 3, 5}};
  for (int i = 0; i < 8; ++i) {
    std::vector<size_t> pieces;
    for (int j = 0; j < 16; ++j)
      pieces.push_back(1 + random() % 40);
    splits.push_back(pieces);
  }
  for (const auto &pieces : splits) {
    const Parsed split = parse(bytes, pieces, limits);
    EXPECT_EQ(split.failure, whole.failure);
    EXPECT_EQ(split.message, whole.message);
    EXPECT_EQ(split.requests.size(), whole.requests.size());
    for (size_t i = 0; i < std::min(split.requests.size(), whole.requests.size()); ++i) {
      EXPECT_EQ(split.requests[i].target, whole.requests[i].target);
      EXPECT_EQ(split.requests[i].body, whole.requests[i].body);
      EXPECT_EQ(split.requests[i].headers, whole.requests[i].headers);
    }
  }
  return whole;
}

TEST(HttpParser, RequestWithContentLength) {
  const Parsed p = parseEverySplit("POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\n"
                                   "Content-Type:  application/json \r\nContent-Length: 11\r\n\r\n"
                                   "{\"prompt\":1}");
  ASSERT_EQ(p.failure, 0) << p.message;
  ASSERT_EQ(p.requests.size(), 1u);
  const HttpRequest &r = p.requests[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/v1/completions");
  EXPECT_EQ(r.target, "/v1/completions?x=1");
  EXPECT_EQ(r.body, "{\"prompt\":1");
  ASSERT_NE(r.header("content-type"), nullptr);
  EXPECT_EQ(*r.header("content-type"), "application/json");
  EXPECT_TRUE(r.keepAlive);
}

TEST(HttpParser, PipelinedRequestsInOrder) {
  const Parsed p = parseEverySplit(
      "GET /a HTTP/1.1\r\n\r\n"
      "POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: x\r\n\r\n"
      "\r\nPOST /c HTTP/1.0\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nhi"
      "GET /%41%ff HTTP/1.1\nConnection: close\n\n");
  ASSERT_EQ(p.failure, 0) << p.message;
  ASSERT_EQ(p.requests.size(), 4u);
  EXPECT_EQ(p.requests[0].path, "/a");
  EXPECT_EQ(p.requests[1].body, "abc0123456789abcdef");
  EXPECT_EQ(p.requests[2].body, "hi");
  EXPECT_TRUE(p.requests[2].keepAlive); // HTTP/1.0 asking for keep-alive
  EXPECT_EQ(p.requests[3].path, "/A\xff");
  EXPECT_FALSE(p.requests[3].keepAlive);
}

TEST(HttpParser, TargetForms) {
  Parsed p = parseEverySplit("GET http://example.com:80/health?q HTTP/1.1\r\n\r\n");
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_EQ(p.requests[0].path, "/health");
  p = parseEverySplit("OPTIONS * HTTP/1.1\r\n\r\n");
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_EQ(p.requests[0].path, "*");
  EXPECT_EQ(parseEverySplit("GET health HTTP/1.1\r\n\r\n").failure, 400);
  EXPECT_EQ(parseEverySplit("GET /%4 HTTP/1.1\r\n\r\n").failure, 400);
  EXPECT_EQ(parseEverySplit("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n").failure, 414);
}

TEST(HttpParser, MalformedHeadsRefused) {
  const std::pair<const char *, int> cases[] = {
      {"GET /\r\n\r\n", 400},
      {"GET / HTTP/1.1 extra\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / HTTPS/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nNo colon\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nName : v\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nA: b\x01\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nExpect: 200\r\n\r\n", 417},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 501},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      // Both framings: a proxy and the server could read different requests (smuggling).
      {"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX", 400},
  };
  for (const auto &[bytes, status] : cases) {
    const Parsed p = parseEverySplit(bytes);
    EXPECT_EQ(p.failure, status) << bytes;
    EXPECT_FALSE(p.message.empty()) << bytes;
    EXPECT_TRUE(p.requests.empty()) << bytes;
  }
  // Multiple equal Content-Length values are one length (RFC 9110 8.6).
  const Parsed same = parseEverySplit("POST / HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\nok");
  ASSERT_EQ(same.requests.size(), 1u);
  EXPECT_EQ(same.requests[0].body, "ok");
}

TEST(HttpParser, LimitsHoldBeforeTheBytesAreKept) {
  HttpLimits limits;
  limits.maxHeadBytes = 1024;
  limits.maxHeaders = 4;
  limits.maxBodyBytes = 100;
  // A head that never ends: refused once past the limit, a byte at a time too.
  HttpRequestParser parser(limits);
  std::string sent = "GET / HTTP/1.1\r\nX: ";
  State state = parser.feed(sent);
  size_t extra = 0;
  while (state == State::Head && extra < 10000) {
    state = parser.feed("y");
    ++extra;
  }
  EXPECT_EQ(state, State::Failed);
  EXPECT_EQ(parser.status(), 431);
  EXPECT_LE(sent.size() + extra, limits.maxHeadBytes + 1);

  std::string fields = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 5; ++i)
    fields += "A" + std::to_string(i) + ": b\r\n";
  EXPECT_EQ(parseEverySplit(fields + "\r\n", limits).failure, 431);
  EXPECT_EQ(parseEverySplit("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", limits).failure, 413);
  // A chunked body: refused at the chunk size that passes the limit, before its data.
  const Parsed chunked = parseEverySplit(
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n32\r\n" + std::string(50, 'a') +
          "\r\n33\r\n",
      limits);
  EXPECT_EQ(chunked.failure, 413);
  EXPECT_EQ(parseEverySplit("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                            "ffffffffffffffffff\r\n",
                            limits)
                .failure,
            413);
  // Exactly at the limits: accepted.
  std::string four = "POST / HTTP/1.1\r\n";
  for (int i = 0; i < 3; ++i)
    four += "A" + std::to_string(i) + ": b\r\n";
  four += "Content-Length: 100\r\n\r\n" + std::string(100, 'z');
  const Parsed full = parseEverySplit(four, limits);
  ASSERT_EQ(full.failure, 0) << full.message;
  EXPECT_EQ(full.requests.at(0).body.size(), 100u);
}

TEST(HttpParser, ExpectContinueAndStarted) {
  HttpRequestParser parser(HttpLimits{});
  EXPECT_FALSE(parser.started());
  EXPECT_EQ(parser.feed("POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n"),
            State::Body);
  EXPECT_TRUE(parser.request().expectContinue);
  EXPECT_TRUE(parser.started());
  EXPECT_EQ(parser.feed("ok"), State::Complete);
  parser.take();
  EXPECT_FALSE(parser.started());
}

std::string respond(const HttpRequest &request, const std::function<void(HttpResponse &)> &f,
                    bool *keepAlive = nullptr) {
  std::string out;
  HttpResponse response(request, [&out](std::string_view bytes) {
    out.append(bytes);
    return true;
  });
  f(response);
  if (keepAlive)
    *keepAlive = response.keepAlive();
  return out;
}

TEST(HttpResponse, WholeAndStreamed) {
  HttpRequest request;
  request.version = "HTTP/1.1";
  bool keepAlive = false;
  std::string out = respond(
      request,
      [](HttpResponse &r) {
        r.setHeader("X-Request-Id", "req_1");
        r.send(429, "application/json", "{}");
      },
      &keepAlive);
  EXPECT_EQ(out, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
                 "Content-Length: 2\r\nX-Request-Id: req_1\r\n\r\n{}");
  EXPECT_TRUE(keepAlive);
  out = respond(
      request,
      [](HttpResponse &r) {
        r.start(200, "text/event-stream");
        r.write("data: x\n\n");
        r.write("");
        r.write("abcdefghijklmnopq");
        r.finish();
      },
      &keepAlive);
  EXPECT_EQ(out, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: "
                 "chunked\r\n\r\n9\r\ndata: x\n\n\r\n11\r\nabcdefghijklmnopq\r\n0\r\n\r\n");
  EXPECT_TRUE(keepAlive);
  // An HTTP/1.0 client cannot read chunks: the stream is the body up to the close.
  request.version = "HTTP/1.0";
  request.keepAlive = true;
  out = respond(
      request,
      [](HttpResponse &r) {
        r.start(200, "text/event-stream");
        r.write("data: x\n\n");
        r.finish();
      },
      &keepAlive);
  EXPECT_EQ(out, "HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                 "data: x\n\n");
  EXPECT_FALSE(keepAlive);
}

TEST(HttpResponse, AFailedWriteEndsIt) {
  HttpRequest request;
  request.version = "HTTP/1.1";
  int writes = 0;
  HttpResponse response(request, [&writes](std::string_view) { return ++writes < 2; });
  EXPECT_TRUE(response.start(200, "text/event-stream"));
  EXPECT_FALSE(response.write("a"));
  EXPECT_FALSE(response.write("b"));
  EXPECT_TRUE(response.clientGone());
  EXPECT_EQ(writes, 2);
  response.finish();
  EXPECT_FALSE(response.keepAlive());
}

} // namespace
} // namespace hetc::server
