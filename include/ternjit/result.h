// SPDX-License-Identifier: Apache-2.0
// result.h - Result<T>, Error, Diagnostic and SourceLoc: how every fallible call reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ternjit {

/// A position in a source: a file name, 1-based line and 1-based byte column.
/// `line == 0` means "no location" (e.g. an error about a whole file).
struct SourceLoc {
  std::string file;
  std::uint32_t line = 0;
  std::uint32_t col = 0;

  /// True when the location names a line.
  [[nodiscard]] bool known() const { return line != 0; }
};

/// How serious a diagnostic is.
enum class Severity : std::uint8_t { Error, Warning, Note };

/// One user-facing problem, with where it happened and optional located notes.
/// `source_line` is the text of the offending line (without newline) when the
/// reporter had it; `render` prints it under the message with a caret.
struct Diagnostic {
  SourceLoc loc;
  Severity severity = Severity::Error;
  std::string message;
  std::string source_line;
  std::vector<Diagnostic> notes;
};

/// What went wrong, in broad classes a caller can branch on.
enum class ErrorCode : std::uint8_t {
  InvalidInput,   ///< user input (source text, IR text, files, shapes) is wrong
  InvalidArgument,///< API misuse: a bad argument or call order
  NotFound,       ///< a named thing (file, layer, function, target) does not exist
  Unsupported,    ///< valid, but not supported by this target/build
  Unavailable,    ///< environment: toolchain, device or library missing
  IoError,        ///< reading or writing a file failed
  Internal,       ///< reported bug-class failure that is still recoverable
};

/// An error: a code, a one-line message and any number of diagnostics.
/// For user-input errors `diagnostics` carries every located problem found
/// (e.g. all verifier failures); `message` then summarises them.
struct Error {
  ErrorCode code = ErrorCode::InvalidInput;
  std::string message;
  std::vector<Diagnostic> diagnostics;
};

/// Renders one diagnostic as `file:line:col: error: message`, then the source
/// line and a caret when `d.source_line` is set, then its notes. Ends in '\n'.
std::string render(const Diagnostic& d);

/// Renders an error: every diagnostic if there are any, else `error: message`.
std::string render(const Error& e);

/// Builds an Error from a code and a message.
inline Error make_error(ErrorCode code, std::string message) {
  return Error{code, std::move(message), {}};
}

/// Builds an InvalidInput error holding one located diagnostic.
inline Error make_located_error(SourceLoc loc, std::string message,
                                std::string source_line = {}) {
  Diagnostic d{std::move(loc), Severity::Error, message, std::move(source_line), {}};
  return Error{ErrorCode::InvalidInput, std::move(message), {std::move(d)}};
}

/// An expected-like value-or-Error. Becomes std::expected with C++23.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}   // NOLINT: implicit by design
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  /// True when a value is held.
  [[nodiscard]] bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  /// The value. Precondition: ok().
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  /// The error. Precondition: !ok().
  Error& error() & { return std::get<1>(v_); }
  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

/// Result<void>: success or an Error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : e_(std::move(error)) {}  // NOLINT: implicit by design

  [[nodiscard]] bool ok() const { return !e_.has_value(); }
  explicit operator bool() const { return ok(); }
  Error& error() & { return *e_; }
  const Error& error() const& { return *e_; }
  Error&& error() && { return std::move(*e_); }

 private:
  std::optional<Error> e_;
};

/// Success value for Result<void>.
inline Result<void> success() { return {}; }

}  // namespace ternjit

/// Propagates an error: `TERNJIT_TRY(auto x, f());` or `TERNJIT_TRY_VOID(g());`.
#define TERNJIT_DETAIL_CAT2(a, b) a##b
#define TERNJIT_DETAIL_CAT(a, b) TERNJIT_DETAIL_CAT2(a, b)
#define TERNJIT_TRY(decl, expr) TERNJIT_DETAIL_TRY(decl, expr, TERNJIT_DETAIL_CAT(tj_try_, __LINE__))
#define TERNJIT_DETAIL_TRY(decl, expr, tmp)      \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return std::move(tmp).error();  \
  decl = std::move(tmp).value()
#define TERNJIT_TRY_VOID(expr)                                        \
  do {                                                                \
    auto tj_try_void_ = (expr);                                       \
    if (!tj_try_void_.ok()) return std::move(tj_try_void_).error();   \
  } while (0)
