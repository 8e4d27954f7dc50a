// HTTP/1.1 requests read from bytes as they arrive (RFC 9112), with every limit checked before
// the bytes it limits are kept: the head's size and field count, the body's size whether it comes
// with a Content-Length or chunked. No sockets: the listener feeds it what it reads, the fuzzer
// and the unit tests feed it anything.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hetc::server {

struct HttpLimits {
  size_t maxHeadBytes = 64u << 10; // request line and header fields together (431 past it)
  size_t maxHeaders = 100;         // header fields (431); browsers send about 20
  size_t maxBodyBytes = 8u << 20;  // 413, whether announced by Content-Length or chunked
};

struct HttpRequest {
  std::string method;
  std::string target;  // as sent
  std::string path;    // the target's path, percent-decoded (may hold any byte)
  std::string version; // "HTTP/1.1" or "HTTP/1.0"
  std::vector<std::pair<std::string, std::string>> headers; // names lower-cased, values trimmed
  std::string body;    // de-chunked
  bool keepAlive = true;
  bool expectContinue = false; // `Expect: 100-continue`: the client waits for a 100 first

  // The first value of a header (name lower-case), or null.
  const std::string *header(std::string_view name) const;
};

class HttpRequestParser {
public:
  enum class State {
    Head,     // reading the request line and header fields
    Body,     // the head is read (request() holds it), the body is not yet whole
    Complete, // request() is whole; take() it
    Failed,   // status() and message() say why; the connection answers and closes
  };

  explicit HttpRequestParser(HttpLimits limits) : limits_(limits) {}

  // Reads `bytes` (any split of the stream) until a request is complete or wrong. Bytes after a
  // complete request are kept for the next: call take(), then advance() to parse them.
  State feed(std::string_view bytes);
  State advance() { return feed({}); }
  State state() const { return state_; }

  // Whether any byte of the next request has arrived (the listener's deadlines start there).
  bool started() const { return state_ != State::Head || !buffer_.empty(); }
  const HttpRequest &request() const { return request_; }
  // The complete request; the parser starts on the next one (bytes already read are kept).
  HttpRequest take();

  int status() const { return status_; }
  const std::string &message() const { return message_; }

private:
  enum class BodyMode { Length, ChunkSize, ChunkData, ChunkEnd, Trailers };

  void parseHead(std::string_view head);
  void readBody();
  void fail(int status, std::string message);
  // The position after the first empty line at or after `from`, or npos; lines end in LF or CRLF.
  size_t endOfHead(size_t from) const;

  HttpLimits limits_;
  State state_ = State::Head;
  std::string buffer_;  // bytes read and not yet parsed
  size_t scanned_ = 0;  // buffer_ bytes searched for the head's end
  HttpRequest request_;
  BodyMode mode_ = BodyMode::Length;
  size_t remaining_ = 0; // of the Content-Length, or of the current chunk
  size_t trailerBytes_ = 0;
  int status_ = 0;
  std::string message_;
};

} // namespace hetc::server
