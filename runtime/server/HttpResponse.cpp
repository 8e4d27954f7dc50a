#include "runtime/server/HttpResponse.h"

#include <cstdio>

namespace hetc::server {

const char *httpReason(int status) {
  switch (status) {
  case 100: return "Continue";
  case 200: return "OK";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 413: return "Content Too Large";
  case 414: return "URI Too Long";
  case 417: return "Expectation Failed";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 503: return "Service Unavailable";
  case 505: return "HTTP Version Not Supported";
  default: return "Unknown";
  }
}

HttpResponse::HttpResponse(const HttpRequest &request, ByteSink sink, std::function<bool()> gone)
    : sink_(std::move(sink)), gone_(std::move(gone)), http11_(request.version == "HTTP/1.1"),
      keepAlive_(request.keepAlive) {}

void HttpResponse::setHeader(std::string name, std::string value) {
  headers_.emplace_back(std::move(name), std::move(value));
}

std::string HttpResponse::head(int status, std::string_view contentType,
                               std::string_view framing) {
  std::string out = http11_ ? "HTTP/1.1 " : "HTTP/1.0 ";
  out += std::to_string(status);
  out += ' ';
  out += httpReason(status);
  out += "\r\nContent-Type: ";
  out += contentType;
  out += "\r\n";
  out += framing;
  for (const auto &[name, value] : headers_)
    out += name + ": " + value + "\r\n";
  out += keepAlive_ ? (http11_ ? "" : "Connection: keep-alive\r\n") : "Connection: close\r\n";
  out += "\r\n";
  return out;
}

bool HttpResponse::put(std::string_view bytes) {
  if (failed_)
    return false;
  if (!sink_(bytes))
    failed_ = true;
  return !failed_;
}

bool HttpResponse::send(int status, std::string_view contentType, std::string_view body) {
  if (started_)
    return false;
  started_ = finished_ = true;
  std::string out =
      head(status, contentType, "Content-Length: " + std::to_string(body.size()) + "\r\n");
  // One write for a small response, so it leaves in one segment.
  if (body.size() <= 64u << 10)
    return put(out.append(body));
  return put(out) && put(body);
}

bool HttpResponse::start(int status, std::string_view contentType) {
  if (started_)
    return false;
  started_ = true;
  // An HTTP/1.0 client reads to the close: it cannot be told where a chunked body ends.
  chunked_ = http11_;
  if (!chunked_)
    keepAlive_ = false;
  return put(head(status, contentType, chunked_ ? "Transfer-Encoding: chunked\r\n" : ""));
}

bool HttpResponse::write(std::string_view piece) {
  if (!started_ || finished_)
    return false;
  if (piece.empty())
    return !failed_; // an empty chunk would end the body
  if (!chunked_)
    return put(piece);
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
  std::string out = size;
  out.append(piece);
  out += "\r\n";
  return put(out);
}

bool HttpResponse::finish() {
  if (!started_ || finished_)
    return !failed_;
  finished_ = true;
  return chunked_ ? put("0\r\n\r\n") : !failed_;
}

} // namespace hetc::server
