#include "cache/remote_lock.h"

#include "cache/remote_value.h"

#include <fmt/format.h>

#include <chrono>
#include <random>
#include <thread>
#include <unistd.h>

namespace specjit::cache {

FleetLock::FleetLock(FleetLock&& other) noexcept
    : m_store(std::exchange(other.m_store, nullptr)), m_name(std::move(other.m_name)),
      m_token(std::move(other.m_token)) {}

FleetLock& FleetLock::operator=(FleetLock&& other) noexcept {
  if (this != &other) {
    release();
    m_store = std::exchange(other.m_store, nullptr);
    m_name = std::move(other.m_name);
    m_token = std::move(other.m_token);
  }
  return *this;
}

void FleetLock::release() {
  if (m_store == nullptr)
    return;
  auto released = m_store->remove_if_equal(m_name, m_token);
  if (!released)
    llvm::consumeError(released.takeError());
  m_store = nullptr;
}

std::string new_lock_token() {
  std::random_device device;
  std::uniform_int_distribution<uint64_t> bits;
  return fmt::format("{:016x}{:016x}-{}", bits(device), bits(device), ::getpid());
}

namespace {
constexpr uint64_t k_max_token_bytes = 256; // new_lock_token's are about 40
} // namespace

FleetWait acquire_or_wait(RemoteStore& store, const Digest128& key) {
  using clock = std::chrono::steady_clock;
  const RemoteUrl& url = store.url();
  std::string lock_name = remote_lock_name(key), entry_name = remote_entry_name(key);
  std::string token = new_lock_token();
  auto start = clock::now();
  auto deadline = start + std::chrono::milliseconds(url.lock_ttl_ms);
  auto pause = std::chrono::milliseconds(5);
  std::string holder; // the token last seen in the lock
  FleetWait result;
  auto waited = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start).count();
  };
  while (true) {
    auto taken = store.set(lock_name, token, /*only_if_absent=*/true, url.lock_ttl_ms);
    if (!taken) {
      llvm::consumeError(taken.takeError());
      break;
    }
    if (*taken) {
      // The holder before us may have published just before releasing.
      FleetLock lock(store, lock_name, token);
      auto value = store.get(entry_name, url.max_value_bytes);
      if (value && *value)
        result.value = std::move(*value); // and the lock goes again at once
      else if (!value)
        llvm::consumeError(value.takeError());
      else
        result.lock = std::move(lock);
      break;
    }
    auto value = store.get(entry_name, url.max_value_bytes);
    if (!value) {
      llvm::consumeError(value.takeError());
      break;
    }
    if (*value) {
      result.value = std::move(*value);
      break;
    }
    result.contended = true;
    // Each holder gets its expiry: the wait restarts when the lock changes hands, so the waiters
    // of a holder that died give its successor the time to compile.
    auto current = store.get(lock_name, k_max_token_bytes);
    if (!current) {
      llvm::consumeError(current.takeError());
      break;
    }
    if (*current && **current != holder) {
      holder = std::move(**current);
      deadline = clock::now() + std::chrono::milliseconds(url.lock_ttl_ms);
    }
    if (clock::now() >= deadline)
      break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
  result.waited_ms = result.contended ? waited() : 0;
  return result;
}

} // namespace specjit::cache
