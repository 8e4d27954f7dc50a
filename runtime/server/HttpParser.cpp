#include "runtime/server/HttpParser.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace hetc::server {
namespace {

// A request target longer than this gets 414, whatever room the head has left.
constexpr size_t kMaxTargetBytes = 8192;
// A chunk-size line (hex digits and extensions) longer than this is refused.
constexpr size_t kMaxChunkLine = 1024;

bool isTokenChar(unsigned char c) {
  if (std::isalnum(c) && c < 0x80)
    return true;
  return c != 0 && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

bool isToken(std::string_view s) {
  if (s.empty())
    return false;
  for (unsigned char c : s)
    if (!isTokenChar(c))
      return false;
  return true;
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equalsLower(std::string_view s, std::string_view lowerCase) {
  if (s.size() != lowerCase.size())
    return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (lower(s[i]) != lowerCase[i])
      return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// Calls f on each comma-separated element of a field value, trimmed; empty elements skipped.
template <typename F> void forEachElement(std::string_view value, F f) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    const std::string_view element = trim(value.substr(0, comma));
    if (!element.empty())
      f(element);
    if (comma == std::string_view::npos)
      break;
    value.remove_prefix(comma + 1);
  }
}

int hexValue(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

// The path of a request target, percent-decoded; false for a target that is not origin-form,
// absolute-form or "*", or holds a malformed escape.
bool targetPath(std::string_view target, std::string &path) {
  if (target == "*") {
    path = "*";
    return true;
  }
  if (target.front() != '/') {
    // absolute-form (a request to a proxy; servers must accept it): the path after the authority.
    size_t scheme = std::string_view::npos;
    if (target.size() > 7 && equalsLower(target.substr(0, 7), "http://"))
      scheme = 7;
    else if (target.size() > 8 && equalsLower(target.substr(0, 8), "https://"))
      scheme = 8;
    if (scheme == std::string_view::npos)
      return false;
    const size_t slash = target.find_first_of("/?#", scheme);
    target = slash == std::string_view::npos || target[slash] != '/' ? std::string_view("/")
                                                                     : target.substr(slash);
  }
  target = target.substr(0, target.find_first_of("?#"));
  path.clear();
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] != '%') {
      path += target[i];
      continue;
    }
    if (i + 2 >= target.size() || hexValue(target[i + 1]) < 0 || hexValue(target[i + 2]) < 0)
      return false;
    path += static_cast<char>(hexValue(target[i + 1]) * 16 + hexValue(target[i + 2]));
    i += 2;
  }
  return true;
}

// Digits only, without overflow.
bool parseSize(std::string_view digits, size_t &value) {
  if (digits.empty() || digits.size() > 18)
    return false;
  value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9')
      return false;
    value = value * 10 + static_cast<size_t>(c - '0');
  }
  return true;
}

} // namespace

const std::string *HttpRequest::header(std::string_view name) const {
  for (const auto &[key, value] : headers)
    if (key == name)
      return &value;
  return nullptr;
}

HttpRequestParser::State HttpRequestParser::feed(std::string_view bytes) {
  if (state_ == State::Failed)
    return state_;
  buffer_.append(bytes.data(), bytes.size());
  if (state_ == State::Complete)
    return state_; // the next request's bytes wait for take()
  if (state_ == State::Head) {
    // Empty lines before a request line are skipped (RFC 9112 2.2), as after a body's CRLF.
    size_t blank = 0;
    while (blank < buffer_.size() && (buffer_[blank] == '\r' || buffer_[blank] == '\n'))
      ++blank;
    if (blank > 0) {
      buffer_.erase(0, blank);
      scanned_ = 0;
    }
    const size_t end = endOfHead(scanned_ >= 2 ? scanned_ - 2 : 0);
    if (end == std::string::npos || end > limits_.maxHeadBytes) {
      if (buffer_.size() > limits_.maxHeadBytes) {
        fail(431, "the request's head (request line and header fields) is longer than " +
                      std::to_string(limits_.maxHeadBytes) + " bytes");
      }
      scanned_ = buffer_.size();
      return state_;
    }
    parseHead(std::string_view(buffer_).substr(0, end));
    if (state_ == State::Failed)
      return state_;
    buffer_.erase(0, end);
    scanned_ = 0;
  }
  if (state_ == State::Body)
    readBody();
  return state_;
}

HttpRequest HttpRequestParser::take() {
  HttpRequest request = std::move(request_);
  request_ = HttpRequest();
  state_ = State::Head;
  scanned_ = 0;
  remaining_ = 0;
  trailerBytes_ = 0;
  return request;
}

size_t HttpRequestParser::endOfHead(size_t from) const {
  const char *data = buffer_.data();
  const size_t size = buffer_.size();
  for (size_t i = from; i < size;) {
    const void *found = std::memchr(data + i, '\n', size - i);
    if (!found)
      return std::string::npos;
    i = static_cast<size_t>(static_cast<const char *>(found) - data);
    if (i + 1 < size && data[i + 1] == '\n')
      return i + 2;
    if (i + 2 < size && data[i + 1] == '\r' && data[i + 2] == '\n')
      return i + 3;
    ++i;
  }
  return std::string::npos;
}

void HttpRequestParser::fail(int status, std::string message) {
  state_ = State::Failed;
  status_ = status;
  message_ = std::move(message);
  buffer_.clear();
  buffer_.shrink_to_fit();
  request_.keepAlive = false;
}

void HttpRequestParser::parseHead(std::string_view head) {
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    const size_t newline = head.find('\n');
    std::string_view line = head.substr(0, newline);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.empty())
      break; // the empty line that ends the head
    lines.push_back(line);
    head.remove_prefix(newline == std::string_view::npos ? head.size() : newline + 1);
  }
  for (std::string_view line : lines)
    for (unsigned char c : line)
      if ((c < 0x20 && c != '\t') || c == 0x7f)
        return fail(400, "the request's head holds a control character");

  // The request line: method SP target SP version.
  const std::string_view requestLine = lines.front();
  const size_t first = requestLine.find(' ');
  const size_t last = requestLine.rfind(' ');
  if (first == std::string_view::npos || first == last)
    return fail(400, "malformed request line (expected 'METHOD target HTTP/1.1')");
  const std::string_view method = requestLine.substr(0, first);
  const std::string_view target = requestLine.substr(first + 1, last - first - 1);
  const std::string_view version = requestLine.substr(last + 1);
  if (!isToken(method))
    return fail(400, "malformed request method");
  if (target.empty() || target.find(' ') != std::string_view::npos || target.find('\t') != std::string_view::npos)
    return fail(400, "malformed request target");
  if (target.size() > kMaxTargetBytes)
    return fail(414, "the request target is longer than " + std::to_string(kMaxTargetBytes) +
                         " bytes");
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !std::isdigit(static_cast<unsigned char>(version[5])) ||
      version[6] != '.' || !std::isdigit(static_cast<unsigned char>(version[7])))
    return fail(400, "malformed HTTP version");
  if (version != "HTTP/1.1" && version != "HTTP/1.0")
    return fail(505, "HTTP version " + std::string(version.substr(5)) +
                         " is not supported (1.0 and 1.1 are)");
  request_.method = method;
  request_.target = target;
  request_.version = version;
  if (!targetPath(target, request_.path))
    return fail(400, "malformed request target (a path starting with '/' was expected)");

  if (lines.size() - 1 > limits_.maxHeaders)
    return fail(431, "the request has " + std::to_string(lines.size() - 1) +
                         " header fields; at most " + std::to_string(limits_.maxHeaders) +
                         " are accepted");
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (line.front() == ' ' || line.front() == '\t')
      return fail(400, "a header field continues over lines (obsolete line folding)");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !isToken(line.substr(0, colon)))
      return fail(400, "malformed header field (expected 'Name: value')");
    std::string name(line.substr(0, colon));
    for (char &c : name)
      c = lower(c);
    request_.headers.emplace_back(std::move(name), std::string(trim(line.substr(colon + 1))));
  }

  const bool http11 = version == "HTTP/1.1";
  request_.keepAlive = http11;
  bool chunked = false, transferEncoding = false, contentLength = false;
  size_t length = 0;
  for (const auto &[name, value] : request_.headers) {
    if (name == "content-length") {
      bool valid = true;
      forEachElement(value, [&](std::string_view element) {
        size_t n = 0;
        if (!parseSize(element, n) || (contentLength && n != length))
          valid = false;
        length = n;
        contentLength = true;
      });
      if (!valid || !contentLength)
        return fail(400, "malformed Content-Length");
    } else if (name == "transfer-encoding") {
      transferEncoding = true;
      bool valid = true;
      forEachElement(value, [&](std::string_view coding) {
        // Only chunked, once and last: a compressed request body is not read.
        if (!equalsLower(coding, "chunked") || chunked)
          valid = false;
        chunked = true;
      });
      if (!valid || !chunked)
        return fail(501, "Transfer-Encoding '" + value + "' is not supported (only chunked is)");
    } else if (name == "connection") {
      forEachElement(value, [&](std::string_view option) {
        if (equalsLower(option, "close"))
          request_.keepAlive = false;
        else if (equalsLower(option, "keep-alive") && !http11)
          request_.keepAlive = true;
      });
    } else if (name == "expect") {
      if (!equalsLower(value, "100-continue"))
        return fail(417, "Expect '" + value + "' is not supported (only 100-continue is)");
      request_.expectContinue = http11;
    }
  }
  // Both framings at once is how requests are smuggled past proxies: refused (RFC 9112 6.1).
  if (transferEncoding && contentLength)
    return fail(400, "a request with both Transfer-Encoding and Content-Length");
  if (transferEncoding && !http11)
    return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
  if (length > limits_.maxBodyBytes)
    return fail(413, "the body is " + std::to_string(length) + " bytes; at most " +
                         std::to_string(limits_.maxBodyBytes) + " are accepted");
  if (chunked) {
    mode_ = BodyMode::ChunkSize;
    state_ = State::Body;
  } else if (length > 0) {
    mode_ = BodyMode::Length;
    remaining_ = length;
    request_.body.reserve(length);
    state_ = State::Body;
  } else {
    state_ = State::Complete;
  }
}

void HttpRequestParser::readBody() {
  size_t used = 0; // buffer_ bytes consumed, erased once at the end
  auto tooLarge = [this] {
    fail(413, "the body is larger than " + std::to_string(limits_.maxBodyBytes) +
                  " bytes, the most accepted");
  };
  while (state_ == State::Body) {
    const std::string_view rest = std::string_view(buffer_).substr(used);
    if (mode_ == BodyMode::Length || mode_ == BodyMode::ChunkData) {
      const size_t n = std::min(remaining_, rest.size());
      request_.body.append(rest.data(), n);
      used += n;
      remaining_ -= n;
      if (remaining_ > 0)
        break;
      if (mode_ == BodyMode::Length)
        state_ = State::Complete;
      else
        mode_ = BodyMode::ChunkEnd;
      continue;
    }
    if (mode_ == BodyMode::ChunkEnd) {
      if (rest.empty() || (rest[0] == '\r' && rest.size() < 2))
        break;
      if (rest[0] == '\n')
        used += 1;
      else if (rest[0] == '\r' && rest[1] == '\n')
        used += 2;
      else
        return fail(400, "malformed chunked body (a chunk does not end with CRLF)");
      mode_ = BodyMode::ChunkSize;
      continue;
    }
    // A chunk-size line or a trailer line.
    const size_t newline = rest.find('\n');
    if (newline == std::string_view::npos) {
      if (mode_ == BodyMode::ChunkSize && rest.size() > kMaxChunkLine)
        return fail(400, "malformed chunked body (a chunk-size line is too long)");
      if (mode_ == BodyMode::Trailers && trailerBytes_ + rest.size() > limits_.maxHeadBytes)
        return fail(431, "the chunked body's trailer fields are too long");
      break;
    }
    std::string_view line = rest.substr(0, newline);
    used += newline + 1;
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (mode_ == BodyMode::Trailers) {
      // Trailer fields are read and dropped: nothing the server does depends on them.
      trailerBytes_ += line.size();
      if (trailerBytes_ > limits_.maxHeadBytes)
        return fail(431, "the chunked body's trailer fields are too long");
      if (line.empty())
        state_ = State::Complete;
      continue;
    }
    if (line.size() > kMaxChunkLine)
      return fail(400, "malformed chunked body (a chunk-size line is too long)");
    size_t size = 0, digits = 0;
    for (; digits < line.size() && hexValue(line[digits]) >= 0; ++digits) {
      if (digits == 15)
        return tooLarge();
      size = size * 16 + static_cast<size_t>(hexValue(line[digits]));
    }
    const std::string_view after = trim(line.substr(digits));
    if (digits == 0 || (!after.empty() && after.front() != ';'))
      return fail(400, "malformed chunked body (a chunk size is not hexadecimal)");
    if (size > limits_.maxBodyBytes - request_.body.size())
      return tooLarge();
    if (size == 0) {
      mode_ = BodyMode::Trailers;
    } else {
      mode_ = BodyMode::ChunkData;
      remaining_ = size;
    }
  }
  if (state_ != State::Failed)
    buffer_.erase(0, used);
}

} // namespace hetc::server
