// The server's connections. One thread waits on every connection that is still sending a request
// (epoll), with a deadline for each and a bound on how many there are; only a complete request is
// handed to a worker thread, which writes its response and hands the connection back. So a client
// that sends its headers one byte a second holds a few hundred bytes and no thread, and is dropped
// at its deadline, or earlier when newer connections need its place.
//
// Why not cpp-httplib's server: it gives each connection a pool thread from accept on, with a
// timeout per read, not per request, so slow senders take every thread (docs/serving.md).
#pragma once

#include "runtime/format/Status.h"
#include "runtime/server/HttpParser.h"
#include "runtime/server/HttpResponse.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace hetc::server {

struct ListenerOptions {
  std::string host = "127.0.0.1";
  int port = 8080; // 0: any free port
  HttpLimits limits;
  // A request's head and body must arrive within this of its first byte (or of the connection's
  // opening, TLS handshake included); 408 and close otherwise.
  std::chrono::milliseconds readTimeout{10000};
  // A kept-alive connection waiting for its next request closes after this.
  std::chrono::milliseconds idleTimeout{5000};
  // A response write blocked this long (a client that stopped reading) fails.
  std::chrono::milliseconds writeTimeout{30000};
  // Connections still sending a request (or idle between requests); past it, the one that has been
  // at it longest is dropped. Honest clients send a request in milliseconds and are never it.
  size_t maxReceiving = 256;
  size_t workers = 8; // requests handled at once (completions hold one for their whole answer)
  // TLS when both are set: PEM files (the certificate may carry its chain).
  std::string tlsCertificate;
  std::string tlsKey;
};

// Counters for /metrics.
struct ListenerCounters {
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> timedOut{0}; // dropped at their read deadline
  std::atomic<uint64_t> evicted{0};  // dropped for a newer connection past maxReceiving
  std::atomic<uint64_t> malformed{0}; // refused by the parser (4xx, 5xx) and closed
  std::atomic<uint64_t> receiving{0}; // now
};

class HttpListener {
public:
  using Handler = std::function<void(const HttpRequest &, HttpResponse &)>;
  // The body of a response the listener writes itself (a malformed request, a timeout, an
  // exception out of the handler): a status and a one-line message.
  using ErrorBody = std::function<std::string(int status, const std::string &message)>;

  HttpListener(ListenerOptions options, Handler handler, ErrorBody errorBody);
  ~HttpListener();

  // Binds and listens (loads the TLS certificate first); returns the port.
  Result<int> bind();
  // Serves until stop(), then waits for the handlers running.
  Status run();
  // Any thread: stops accepting and reading; the handlers running finish.
  void stop();

  const ListenerCounters &counters() const { return counters_; }
  bool tls() const { return tls_ != nullptr; }

private:
  struct Connection;
  using Clock = std::chrono::steady_clock;

  void loop();
  void accept();
  void receive(Connection &connection);
  void watch(std::unique_ptr<Connection> connection);
  void dispatch(int fd);
  void close(int fd, int status, const std::string &message);
  void evictOldest();
  void expire();
  void work();
  void serveOn(std::unique_ptr<Connection> connection);
  void wake();

  ListenerOptions options_;
  Handler handler_;
  ErrorBody errorBody_;
  ListenerCounters counters_;
  void *tls_ = nullptr; // SSL_CTX, opaque so OpenSSL's headers stay in the .cpp
  int listen_ = -1;
  int epoll_ = -1;
  int wake_ = -1; // eventfd: stop, or a connection handed back
  std::atomic<bool> stopping_{false};
  // The loop thread's: connections sending a request, by descriptor.
  std::unordered_map<int, std::unique_ptr<Connection>> receiving_;

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::unique_ptr<Connection>> requests_; // complete requests for the workers
  std::vector<std::unique_ptr<Connection>> returned_; // kept-alive connections for the loop
  bool workersExit_ = false;
  std::vector<std::thread> workers_;
};

} // namespace hetc::server
