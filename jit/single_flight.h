// SPDX-License-Identifier: Apache-2.0
// single_flight.h - a keyed cache that builds each missing entry once while concurrent askers wait.
//
// The specialization cache of a Program (as oneDNN's primitive cache): a hit is a shared
// lock and one hash lookup of a string_view (no allocation); the first caller of a new
// key builds it outside the lock while later callers of that key wait on a shared
// future; different keys build concurrently. A failed build is not cached: every
// waiter gets its error and the next call tries again.
#pragma once

#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ternjit/result.h"

namespace ternjit::jit {

/// How get() found its value.
enum class Lookup : std::uint8_t {
  Hit,   ///< already built
  Miss,  ///< this call built it
  Wait,  ///< another call was building it; this one waited
};

/// Owns one V per key; the pointers handed out stay valid while the cache lives.
template <class V>
class SingleFlightCache {
 public:
  /// The value of a built key, or nullptr (absent or still building). Thread-safe.
  [[nodiscard]] const V* find(std::string_view key) const {
    std::shared_lock lock(mu_);
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second->value.get();
  }

  /// The value of `key`, calling `build()` (-> Result<std::unique_ptr<V>>) when no
  /// call has built it yet and none is building it. `how` says which happened. A build
  /// error (or exception, as an Internal error) is returned to the builder and to every
  /// waiter, and the key stays unbuilt. Thread-safe; `build` runs without the lock held.
  template <class Build>
  Result<const V*> get(std::string_view key, Build&& build, Lookup& how) {
    std::shared_future<Result<const V*>> pending;
    {
      std::shared_lock lock(mu_);
      auto it = map_.find(key);
      if (it != map_.end()) {
        if (const V* v = it->second->value.get()) {
          how = Lookup::Hit;
          return v;
        }
        pending = it->second->pending;
      }
    }
    if (pending.valid()) {
      how = Lookup::Wait;
      return pending.get();
    }

    std::promise<Result<const V*>> promise;
    Slot* slot = nullptr;
    {
      std::unique_lock lock(mu_);
      auto it = map_.find(key);
      if (it != map_.end()) {
        if (const V* v = it->second->value.get()) {
          how = Lookup::Hit;
          return v;
        }
        pending = it->second->pending;
      } else {
        auto s = std::make_unique<Slot>();
        s->pending = promise.get_future().share();
        slot = s.get();
        map_.emplace(std::string(key), std::move(s));
      }
    }
    if (pending.valid()) {
      how = Lookup::Wait;
      return pending.get();
    }

    how = Lookup::Miss;
    Result<std::unique_ptr<V>> built = make_error(ErrorCode::Internal, "build did not run");
    try {
      built = build();
    } catch (const std::exception& e) {
      built = make_error(ErrorCode::Internal, std::string("exception while specializing: ") + e.what());
    } catch (...) {
      built = make_error(ErrorCode::Internal, "unknown exception while specializing");
    }
    Result<const V*> out = built.ok() ? Result<const V*>(built.value().get()) : Result<const V*>(built.error());
    {
      std::unique_lock lock(mu_);
      if (built.ok()) {
        slot->value = std::move(built.value());
      } else {
        map_.erase(map_.find(key));
      }
    }
    promise.set_value(out);
    return out;
  }

  /// The number of built keys. Thread-safe.
  [[nodiscard]] std::size_t size() const {
    std::shared_lock lock(mu_);
    std::size_t n = 0;
    for (const auto& [k, s] : map_) n += s->value != nullptr;
    return n;
  }

 private:
  struct Slot {
    std::unique_ptr<V> value;                         // set once built (under the unique lock)
    std::shared_future<Result<const V*>> pending;     // what waiters wait on while building
  };
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<Slot>, Hash, std::equal_to<>> map_;
};

}  // namespace ternjit::jit
