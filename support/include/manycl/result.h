// The one result type of ManyCL's runtime and device: a value, or an error carrying an
// OpenCL error code (where one applies) and a message for the user. The API layer turns the
// code into the entry point's return value and logs the message (MANYCL_LOG=api, see
// manycl/log.h); exceptions never cross the C ABI, so fallible internal calls return this.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace manycl {

struct Error {
  int code = -1; // an OpenCL error code where one applies, else -1
  std::string message;
};

template <class T> class Result {
public:
  Result(T value) : state_(std::move(value)) {}
  Result(Error error) : state_(std::move(error)) {}

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T &value() { return std::get<0>(state_); }
  const T &value() const { return std::get<0>(state_); }
  T &operator*() { return value(); }
  T *operator->() { return &value(); }
  const Error &error() const { return std::get<1>(state_); }

private:
  std::variant<T, Error> state_;
};

template <> class Result<void> {
public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error &error() const { return error_; }

private:
  Error error_;
  bool ok_ = true;
};

inline Error make_error(std::string message, int code = -1) { return Error{code, std::move(message)}; }

} // namespace manycl
