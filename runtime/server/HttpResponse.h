// One HTTP/1.1 response, written through a sink (the connection's socket, or a string in the
// fuzzer and the tests): whole (send), or streamed (start, write..., finish), chunked for an
// HTTP/1.1 client and up to the connection's close for an HTTP/1.0 one.
#pragma once

#include "runtime/server/HttpParser.h"

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hetc::server {

// Writes every byte or returns false (the client left, or stopped reading for too long).
using ByteSink = std::function<bool(std::string_view)>;

const char *httpReason(int status);

class HttpResponse {
public:
  // `gone`, when given, says whether the client has left without writing to it.
  HttpResponse(const HttpRequest &request, ByteSink sink, std::function<bool()> gone = {});

  // Headers for the response not yet started (Content-Type, -Length and Connection are set here).
  void setHeader(std::string name, std::string value);
  // The connection closes after this response (the rest of a refused body is never read).
  void closeConnection() { keepAlive_ = false; }

  bool send(int status, std::string_view contentType, std::string_view body);
  bool start(int status, std::string_view contentType);
  bool write(std::string_view piece);
  bool finish();

  bool started() const { return started_; }
  bool finished() const { return finished_; }
  // Whether a write failed: the client is gone.
  bool failed() const { return failed_; }
  // Whether the client is gone: a write failed, or it closed its side of the connection.
  bool clientGone() const { return failed_ || (gone_ && gone_()); }
  // Whether the connection may carry another request after this response.
  bool keepAlive() const { return keepAlive_ && finished_ && !failed_; }

private:
  std::string head(int status, std::string_view contentType, std::string_view framing);
  bool put(std::string_view bytes);

  ByteSink sink_;
  std::function<bool()> gone_;
  bool http11_;
  bool keepAlive_;
  bool chunked_ = false;
  bool started_ = false;
  bool finished_ = false;
  bool failed_ = false;
  std::vector<std::pair<std::string, std::string>> headers_;
};

} // namespace hetc::server
