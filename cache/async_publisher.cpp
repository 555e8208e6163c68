#include "cache/async_publisher.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace specjit::cache {

struct AsyncPublisher::State {
  std::mutex mutex; // guards everything below
  std::condition_variable changed;
  std::deque<Job> queue;
  size_t in_flight = 0; // popped, not yet published
  bool closing = false; // the destructor runs: finish the queue, then return
  std::thread thread;
  pid_t thread_pid = -1; // the process the thread runs in
};

AsyncPublisher::AsyncPublisher(DiskStore& store)
    : m_store(store), m_state(std::make_unique<State>()) {}

// True in a child forked after the writer started: the thread exists only in the parent.
bool AsyncPublisher::forked_away() const {
  return m_state->thread_pid >= 0 && m_state->thread_pid != ::getpid();
}

AsyncPublisher::~AsyncPublisher() {
  if (forked_away()) {
    (void)m_state.release(); // the parent's queue, lock and thread: left as they are
    return;
  }
  {
    std::lock_guard<std::mutex> lock(m_state->mutex);
    m_state->closing = true;
  }
  m_state->changed.notify_all();
  if (m_state->thread.joinable())
    m_state->thread.join();
}

void AsyncPublisher::enqueue(Job job) {
  if (!m_store.writable())
    return;
  if (forked_away()) {
    publish(job);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(m_state->mutex);
    m_state->queue.push_back(std::move(job));
    if (!m_state->thread.joinable()) {
      m_state->thread_pid = ::getpid();
      m_state->thread = std::thread([this] { run(); });
    }
  }
  m_state->changed.notify_all();
}

void AsyncPublisher::drain() {
  if (forked_away())
    return; // publishes run inline here
  std::unique_lock<std::mutex> lock(m_state->mutex);
  m_state->changed.wait(lock, [&] { return m_state->queue.empty() && m_state->in_flight == 0; });
}

void AsyncPublisher::run() {
  State& state = *m_state;
  std::unique_lock<std::mutex> lock(state.mutex);
  for (;;) {
    state.changed.wait(lock, [&] { return state.closing || !state.queue.empty(); });
    if (state.queue.empty())
      return; // closing, and everything is written
    Job job = std::move(state.queue.front());
    state.queue.pop_front();
    ++state.in_flight;
    lock.unlock();
    publish(job);
    job = Job{}; // the bytes and the handler go before drain() can return
    lock.lock();
    --state.in_flight;
    state.changed.notify_all();
  }
}

void AsyncPublisher::publish(Job& job) {
  llvm::Error error = m_store.publish(job.key, job.kernel, job.bytes, Durability::relaxed);
  if (!error)
    return;
  if (job.on_failure)
    job.on_failure(m_store.entry_path(job.key, job.kernel), std::move(error));
  else
    llvm::consumeError(std::move(error));
}

} // namespace specjit::cache
