#include "runtime/server/HttpListener.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <arpa/inet.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace hetc::server {
namespace {

using namespace std::chrono_literals;

// Connections the kernel holds before the loop accepts them (capped by net.core.somaxconn).
constexpr int kListenBacklog = 1024;
// Bytes read from a connection per readiness event: one at a time, every connection gets its turn.
constexpr size_t kReadChunk = 64u << 10;
// After a refused request, what the client still sends is read and dropped for this long (or up
// to kDrainBytes), so that closing does not reset the connection before it reads the refusal.
constexpr auto kDrainTime = 1000ms;
constexpr size_t kDrainBytes = 16u << 20;

std::string sslError(const char *what) {
  std::string message = what;
  if (unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    message += std::string(": ") + text;
  }
  ERR_clear_error();
  return message;
}

SSL_CTX *context(void *tls) { return static_cast<SSL_CTX *>(tls); }

} // namespace

struct HttpListener::Connection {
  int fd;
  SSL *ssl = nullptr;
  HttpRequestParser parser;
  Clock::time_point since;    // when it began waiting for this request
  Clock::time_point deadline; // when it is dropped unless the request has come
  bool started = false;       // a byte of the request came: the read deadline runs
  bool continueSent = false;  // `100 Continue` written for this request
  bool draining = false;      // refused: reading and dropping until the close
  size_t drained = 0;

  Connection(int socket, HttpLimits limits) : fd(socket), parser(limits) {}
  ~Connection() {
    if (ssl) {
      SSL_shutdown(ssl); // close_notify, best effort: the socket does not block
      SSL_free(ssl);
    }
    ::close(fd);
  }

  // Bytes read (> 0), 0 at the end of the stream or on an error, -1 when none are ready.
  ssize_t read(char *data, size_t size) {
    if (!ssl) {
      const ssize_t n = ::recv(fd, data, size, 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return -1;
      return n < 0 ? 0 : n;
    }
    const int n = SSL_read(ssl, data, static_cast<int>(size));
    if (n > 0)
      return n;
    const int error = SSL_get_error(ssl, n);
    ERR_clear_error();
    return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE ? -1 : 0;
  }

  // Writes all of `bytes` by `until`; false when the client is gone or too slow to read.
  bool write(std::string_view bytes, Clock::time_point until) {
    while (!bytes.empty()) {
      ssize_t n;
      short waitFor = POLLOUT;
      if (!ssl) {
        n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
          return false;
      } else {
        n = SSL_write(ssl, bytes.data(), static_cast<int>(std::min<size_t>(bytes.size(), 1 << 30)));
        if (n <= 0) {
          const int error = SSL_get_error(ssl, static_cast<int>(n));
          ERR_clear_error();
          if (error == SSL_ERROR_WANT_READ)
            waitFor = POLLIN;
          else if (error != SSL_ERROR_WANT_WRITE)
            return false;
        }
      }
      if (n > 0) {
        bytes.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      if (left.count() <= 0)
        return false;
      pollfd ready{fd, waitFor, 0};
      if (::poll(&ready, 1, static_cast<int>(left.count())) <= 0 && errno != EINTR)
        return false;
    }
    return true;
  }

  // Whether the client closed its side (or the connection broke): nothing it sends is read
  // while its request is served, so POLLRDHUP says it, without reading.
  bool peerGone() const {
    pollfd probe{fd, POLLRDHUP, 0};
    return ::poll(&probe, 1, 0) > 0 && (probe.revents & (POLLRDHUP | POLLHUP | POLLERR));
  }

  void waitForRequest(Clock::time_point now, std::chrono::milliseconds idle) {
    since = now;
    deadline = now + idle;
    started = false;
    continueSent = false;
  }
};

HttpListener::HttpListener(ListenerOptions options, Handler handler, ErrorBody errorBody)
    : options_(std::move(options)), handler_(std::move(handler)),
      errorBody_(std::move(errorBody)) {}

HttpListener::~HttpListener() {
  stop();
  receiving_.clear();
  requests_.clear();
  returned_.clear();
  if (listen_ >= 0)
    ::close(listen_);
  if (epoll_ >= 0)
    ::close(epoll_);
  if (wake_ >= 0)
    ::close(wake_);
  if (tls_)
    SSL_CTX_free(context(tls_));
}

Result<int> HttpListener::bind() {
  if (!options_.tlsCertificate.empty() || !options_.tlsKey.empty()) {
    if (options_.tlsCertificate.empty() || options_.tlsKey.empty())
      return Status::error("TLS needs both a certificate and its key");
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
      return Status::error(sslError("cannot create a TLS context"));
    tls_ = ctx;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (SSL_CTX_use_certificate_chain_file(ctx, options_.tlsCertificate.c_str()) != 1)
      return Status::error(sslError(("cannot read the TLS certificate '" +
                                     options_.tlsCertificate + "'").c_str()));
    const std::string mismatch = "the TLS key '" + options_.tlsKey +
                                 "' does not match the certificate '" +
                                 options_.tlsCertificate + "'";
    if (SSL_CTX_use_PrivateKey_file(ctx, options_.tlsKey.c_str(), SSL_FILETYPE_PEM) != 1) {
      if (ERR_GET_REASON(ERR_peek_error()) == X509_R_KEY_VALUES_MISMATCH) {
        ERR_clear_error();
        return Status::error(mismatch);
      }
      return Status::error(
          sslError(("cannot read the TLS key '" + options_.tlsKey + "'").c_str()));
    }
    if (SSL_CTX_check_private_key(ctx) != 1)
      return Status::error(sslError(mismatch.c_str()));
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo *addresses = nullptr;
  const std::string port = std::to_string(options_.port);
  const std::string where = options_.host + ":" + port;
  if (int error = getaddrinfo(options_.host.c_str(), port.c_str(), &hints, &addresses))
    return Status::error("cannot resolve " + options_.host + ": " + gai_strerror(error));
  for (addrinfo *address = addresses; address && listen_ < 0; address = address->ai_next) {
    const int fd = ::socket(address->ai_family,
                            address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                            address->ai_protocol);
    if (fd < 0)
      continue;
    // SO_REUSEADDR only: with SO_REUSEPORT a second server on the same port would bind too and
    // silently take half the connections.
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, address->ai_addr, address->ai_addrlen) == 0 &&
        ::listen(fd, kListenBacklog) == 0)
      listen_ = fd;
    else
      ::close(fd);
  }
  freeaddrinfo(addresses);
  if (listen_ < 0)
    return Status::error("cannot bind " + where + " (in use, or not an address of this machine)");
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  getsockname(listen_, reinterpret_cast<sockaddr *>(&bound), &length);
  const int boundPort = bound.ss_family == AF_INET6
                            ? ntohs(reinterpret_cast<sockaddr_in6 *>(&bound)->sin6_port)
                            : ntohs(reinterpret_cast<sockaddr_in *>(&bound)->sin_port);

  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_ < 0 || wake_ < 0)
    return Status::error(std::string("cannot create the server's event loop: ") +
                         std::strerror(errno));
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = listen_;
  epoll_ctl(epoll_, EPOLL_CTL_ADD, listen_, &event);
  event.data.fd = wake_;
  epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &event);
  return boundPort;
}

Status HttpListener::run() {
  if (listen_ < 0)
    return Status::error("the server is not bound");
  for (size_t i = 0; i < options_.workers; ++i)
    workers_.emplace_back([this] { work(); });
  loop();
  // Stopped: no more requests are read. Handlers running finish (their requests end with the
  // batch); the connections waiting close.
  ::close(listen_);
  listen_ = -1;
  receiving_.clear();
  counters_.receiving = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    workersExit_ = true;
  }
  ready_.notify_all();
  for (std::thread &worker : workers_)
    worker.join();
  workers_.clear();
  requests_.clear();
  returned_.clear();
  return Status();
}

void HttpListener::stop() {
  stopping_ = true;
  wake();
}

void HttpListener::wake() {
  if (wake_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_, &one, sizeof one);
  }
}

void HttpListener::loop() {
  std::vector<epoll_event> events(256);
  while (!stopping_) {
    // Wake for the nearest deadline (at most a second away, for stop()).
    auto timeout = 1000ms;
    const auto now = Clock::now();
    for (const auto &[fd, connection] : receiving_)
      timeout = std::min(timeout, std::chrono::duration_cast<std::chrono::milliseconds>(
                                      connection->deadline - now) + 1ms);
    const int count = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()),
                                 static_cast<int>(std::max<int64_t>(0, timeout.count())));
    for (int i = 0; i < count && !stopping_; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_) {
        accept();
      } else if (fd == wake_) {
        uint64_t value;
        [[maybe_unused]] ssize_t n = ::read(wake_, &value, sizeof value);
        std::vector<std::unique_ptr<Connection>> back;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          back.swap(returned_);
        }
        for (auto &connection : back)
          watch(std::move(connection));
      } else if (auto found = receiving_.find(fd); found != receiving_.end()) {
        receive(*found->second);
      }
    }
    expire();
  }
}

void HttpListener::accept() {
  for (;;) {
    const int fd = ::accept4(listen_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
      // Out of descriptors: the listening socket stays readable, so waiting would spin. A
      // connection still sending makes room; with none, the loop pauses a moment.
      if (receiving_.empty()) {
        std::this_thread::sleep_for(10ms);
        return;
      }
      evictOldest();
      continue;
    }
    if (fd < 0)
      return; // EAGAIN: all taken; ECONNABORTED and the like: that one is gone
    counters_.accepted.fetch_add(1);
    int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    auto connection = std::make_unique<Connection>(fd, options_.limits);
    if (tls_) {
      connection->ssl = SSL_new(context(tls_));
      if (!connection->ssl)
        continue;
      SSL_set_fd(connection->ssl, fd);
      SSL_set_accept_state(connection->ssl);
    }
    // A new connection has the read timeout for its first request (and its TLS handshake).
    connection->waitForRequest(Clock::now(), options_.readTimeout);
    if (receiving_.size() >= options_.maxReceiving)
      evictOldest();
    watch(std::move(connection));
  }
}

void HttpListener::watch(std::unique_ptr<Connection> connection) {
  const int fd = connection->fd;
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0)
    return; // dropped: the destructor closes it
  Connection &watched = *connection;
  receiving_.emplace(fd, std::move(connection));
  counters_.receiving = receiving_.size();
  // Bytes TLS has already decrypted do not wake epoll.
  if (watched.ssl && SSL_pending(watched.ssl) > 0)
    receive(watched);
}

void HttpListener::receive(Connection &connection) {
  const int fd = connection.fd;
  char data[kReadChunk];
  const ssize_t n = connection.read(data, sizeof data);
  if (n < 0)
    return; // nothing yet (a TLS record not whole)
  if (n == 0) {
    receiving_.erase(fd); // closed by the client (or a failed TLS handshake)
    counters_.receiving = receiving_.size();
    return;
  }
  if (connection.draining) {
    connection.drained += static_cast<size_t>(n);
    if (connection.drained > kDrainBytes)
      close(fd, 0, "");
    return;
  }
  if (!connection.started) {
    connection.started = true;
    connection.deadline = Clock::now() + options_.readTimeout;
  }
  const HttpRequestParser::State state =
      connection.parser.feed(std::string_view(data, static_cast<size_t>(n)));
  switch (state) {
  case HttpRequestParser::State::Complete:
    return dispatch(fd);
  case HttpRequestParser::State::Failed:
    counters_.malformed.fetch_add(1);
    return close(fd, connection.parser.status(), connection.parser.message());
  case HttpRequestParser::State::Body:
    if (connection.parser.request().expectContinue && !connection.continueSent) {
      connection.continueSent = true;
      connection.write("HTTP/1.1 100 Continue\r\n\r\n", Clock::now());
    }
    return;
  case HttpRequestParser::State::Head:
    return;
  }
}

void HttpListener::dispatch(int fd) {
  auto found = receiving_.find(fd);
  std::unique_ptr<Connection> connection = std::move(found->second);
  receiving_.erase(found);
  counters_.receiving = receiving_.size();
  epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.push_back(std::move(connection));
  }
  ready_.notify_one();
}

void HttpListener::close(int fd, int status, const std::string &message) {
  auto found = receiving_.find(fd);
  if (found == receiving_.end())
    return;
  Connection &connection = *found->second;
  if (status == 0 || connection.draining) {
    receiving_.erase(found);
    counters_.receiving = receiving_.size();
    return;
  }
  // The refusal is written without waiting (it fits the socket's buffer); then what the client
  // still sends is drained for a while, so it reads the refusal rather than a reset.
  HttpRequest request;
  request.version = "HTTP/1.1";
  request.keepAlive = false;
  HttpResponse response(request, [&connection](std::string_view bytes) {
    return connection.write(bytes, Clock::now());
  });
  response.send(status, "application/json", errorBody_(status, message));
  ::shutdown(fd, SHUT_WR);
  connection.draining = true;
  connection.deadline = Clock::now() + kDrainTime;
}

void HttpListener::evictOldest() {
  auto oldest = receiving_.end();
  for (auto it = receiving_.begin(); it != receiving_.end(); ++it)
    if (oldest == receiving_.end() || it->second->since < oldest->second->since)
      oldest = it;
  if (oldest == receiving_.end())
    return;
  counters_.evicted.fetch_add(1);
  receiving_.erase(oldest);
  counters_.receiving = receiving_.size();
}

void HttpListener::expire() {
  const auto now = Clock::now();
  std::vector<int> late;
  for (const auto &[fd, connection] : receiving_)
    if (connection->deadline <= now)
      late.push_back(fd);
  for (int fd : late) {
    Connection &connection = *receiving_.at(fd);
    if (connection.draining || !connection.started) {
      close(fd, 0, ""); // an idle kept-alive connection, or a client that never wrote
      continue;
    }
    counters_.timedOut.fetch_add(1);
    char message[96];
    std::snprintf(message, sizeof message, "the request did not arrive within %.3g s of its start",
                  options_.readTimeout.count() / 1000.0);
    close(fd, 408, message);
    close(fd, 0, ""); // no drain for a client this slow
  }
}

void HttpListener::work() {
  for (;;) {
    std::unique_ptr<Connection> connection;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return workersExit_ || !requests_.empty(); });
      if (workersExit_)
        return;
      connection = std::move(requests_.front());
      requests_.pop_front();
    }
    serveOn(std::move(connection));
  }
}

void HttpListener::serveOn(std::unique_ptr<Connection> connection) {
  Connection &c = *connection;
  for (;;) {
    const HttpRequest request = c.parser.take();
    HttpResponse response(
        request,
        [this, &c](std::string_view bytes) {
          return c.write(bytes, Clock::now() + options_.writeTimeout);
        },
        [&c] { return c.peerGone(); });
    try {
      handler_(request, response);
    } catch (const std::exception &e) {
      if (!response.started())
        response.send(500, "application/json",
                      errorBody_(500, std::string("internal error: ") + e.what()));
    } catch (...) {
      if (!response.started())
        response.send(500, "application/json", errorBody_(500, "internal error"));
    }
    if (!response.started())
      response.send(500, "application/json", errorBody_(500, "internal error: no response"));
    // A response cut short (the client left, or an exception mid-stream) is not ended as if
    // whole: the connection closes and the client sees it incomplete.
    if (!response.finished())
      return;
    if (!response.keepAlive() || stopping_)
      return; // the connection closes
    // A pipelined request already read is served here; otherwise the loop waits for the next.
    const HttpRequestParser::State next = c.parser.advance();
    if (next == HttpRequestParser::State::Complete)
      continue;
    if (next == HttpRequestParser::State::Failed) {
      HttpRequest refused;
      refused.version = "HTTP/1.1";
      refused.keepAlive = false;
      HttpResponse refusal(refused, [this, &c](std::string_view bytes) {
        return c.write(bytes, Clock::now() + options_.writeTimeout);
      });
      refusal.send(c.parser.status(), "application/json",
                   errorBody_(c.parser.status(), c.parser.message()));
      return;
    }
    // The next request's wait: idle, or its read deadline when some of it has come.
    const bool begun = c.parser.started();
    c.waitForRequest(Clock::now(), begun ? options_.readTimeout : options_.idleTimeout);
    c.started = begun;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      returned_.push_back(std::move(connection));
    }
    wake();
    return;
  }
}

} // namespace hetc::server
