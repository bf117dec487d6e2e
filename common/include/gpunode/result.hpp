// Errors as values: everything below main() returns Result<T>; only main()
// turns an Error into an exit code and a message.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace gpunode {

// Exit codes are part of the command-line contract (DESIGN.md).
enum class ExitCode : int {
  kOk = 0,
  kBlocked = 1,    // a stage is blocked; the message names the layer and fix
  kUsage = 2,      // bad flag or malformed input file
  kTimeout = 3,    // timed out waiting
  kIntegrity = 4,  // bundle integrity or signature failure
  kCannotRun = 5,  // not root, or another run holds the lock
  // Stopped by SIGINT/SIGTERM/SIGHUP (gpunode/interrupt.hpp); 128 + SIGINT,
  // as shells report a Ctrl-C.
  kInterrupted = 130,
};

struct Error {
  ExitCode exit = ExitCode::kBlocked;
  std::string layer;    // stage or subsystem, e.g. "handler", "journal"
  std::string message;  // what is wrong, in the operator's terms
  std::string fix;      // a command or step that fixes it; may be empty
  int status = 0;       // the protocol status behind it (HTTP), 0 if none
  // Several problems found at once (bundle verify): each its own line in
  // the human text, a list in --json; `message` holds them joined by
  // newlines. Empty for a single problem.
  std::vector<std::string> problems = {};
};

inline Error usage_error(std::string message) {
  return Error{ExitCode::kUsage, "usage", std::move(message), {}};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace gpunode
