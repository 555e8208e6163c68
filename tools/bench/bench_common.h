// Shared pieces of specjit-bench: the machine description every report carries, timers, and
// the JSON report writer.
#pragma once

#include "runtime/driver.h"
#include "runtime/engine.h"

#include <llvm/Support/JSON.h>

#include <fmt/format.h>

#include <chrono>
#include <string>
#include <vector>

namespace specjit::bench {

// GPU name, driver version, NVRTC version, date (UTC), host cores. GPU fields are null without
// a device.
llvm::json::Object machine_description();

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values);

// A fresh directory in the system's temporary directory; removed (with its contents) when the
// object goes out of scope.
class ScratchDir {
public:
  explicit ScratchDir(llvm::StringRef prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return m_path; }

private:
  std::string m_path;
};

// Benchmarks have nothing to recover from: an error is printed ("specjit-bench: <what>: ...")
// and the process exits with status 1.
[[noreturn]] void fail(const char* what, llvm::Error err);
template <typename T> T must(llvm::Expected<T> value, const char* what) {
  if (!value)
    fail(what, value.takeError());
  return std::move(*value);
}
inline void must(llvm::Error err, const char* what) {
  if (err)
    fail(what, std::move(err));
}

// Device time of the work an enqueue puts on `stream`, between two events. Errors are fatal: a
// kernel that faults surfaces at the synchronize, rather than as a time from a dead context.
class StreamTimer {
public:
  StreamTimer(const runtime::Driver& drv, CUstream stream) : m_drv(drv), m_stream(stream) {
    drv.cuEventCreate(&m_start, CU_EVENT_DEFAULT);
    drv.cuEventCreate(&m_stop, CU_EVENT_DEFAULT);
  }
  ~StreamTimer() {
    m_drv.cuEventDestroy(m_start);
    m_drv.cuEventDestroy(m_stop);
  }
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;

  template <class Enqueue> float ms(const char* what, Enqueue&& enqueue) {
    m_drv.cuEventRecord(m_start, m_stream);
    enqueue();
    m_drv.cuEventRecord(m_stop, m_stream);
    must(m_drv.check(m_drv.cuEventSynchronize(m_stop), what), what);
    float ms = 0;
    must(m_drv.check(m_drv.cuEventElapsedTime(&ms, m_start, m_stop), "cuEventElapsedTime"),
         "timing");
    return ms;
  }

private:
  const runtime::Driver& m_drv;
  CUstream m_stream;
  CUevent m_start = nullptr, m_stop = nullptr;
};

// `value` as indented JSON, keys sorted, arrays of plain values on one line each (a report of
// many samples stays short enough to read).
void write_json(llvm::raw_ostream& out, const llvm::json::Value& value, int indent = 0);

// Writes {"machine": ..., <fields>} to path (creating folders); prints where it went.
bool write_report(const std::string& path, llvm::json::Object fields);

// Takes "--name value" pairs after the mode; returns false (with a message) on an unknown flag.
struct Flags {
  std::vector<std::pair<std::string, std::string>> values;
  std::vector<std::string> switches;
  std::string get(const std::string& name, const std::string& fallback) const;
  bool has(const std::string& name) const;
};
bool parse_flags(int argc, char** argv, int first, const std::vector<std::string>& with_value,
                 const std::vector<std::string>& switches, Flags& flags);
// The integer value of flag `name` (`fallback` when absent) into `value`; false, with a message
// naming the mode and the range, for anything else.
bool parse_count(const Flags& flags, const char* mode, const std::string& name, int64_t low,
                 int64_t high, int64_t fallback, int64_t& value);

// Benchmark modes (one file each).
int run_engine_bench(int argc, char** argv);
int run_recompile_trace(int argc, char** argv);
int run_inv_rope_bench(int argc, char** argv);
int run_moe_bench(int argc, char** argv);
int run_remote_bench(int argc, char** argv);
int run_capi_bench(int argc, char** argv);
int run_byok_bench(int argc, char** argv);
int run_digest(int argc, char** argv);

} // namespace specjit::bench
