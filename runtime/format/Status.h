// Error handling for the runtime: no exceptions cross the API; every failure is one message.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace hetc {

class Status {
public:
  Status() = default;
  static Status error(std::string message) { return Status(std::move(message)); }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string &message() const { return message_; }

private:
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
  std::string message_;
};

// A value or the Status saying why there is none.
template <typename T> class Result {
public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status status) : v_(std::move(status)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T &value() { return std::get<0>(v_); }
  const T &value() const { return std::get<0>(v_); }
  T &operator*() { return value(); }
  T *operator->() { return &value(); }
  Status status() const { return ok() ? Status() : std::get<1>(v_); }
  const std::string &message() const { return std::get<1>(v_).message(); }

private:
  std::variant<T, Status> v_;
};

} // namespace hetc
