#include "bench_common.h"

#include "jit/compiler.h"
#include "runtime/driver.h"
#include "runtime/event_log.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace specjit::bench {

llvm::json::Object machine_description() {
  llvm::json::Object machine{{"nvrtc", jit::nvrtc_version().name()},
                             {"date", runtime::utc_timestamp_now()},
                             {"host_cores", static_cast<int64_t>(std::thread::hardware_concurrency())},
                             {"gpu", nullptr},
                             {"driver", nullptr}};
  if (!runtime::device_available())
    return machine;
  const runtime::Driver& drv = *runtime::driver();
  CUdevice device = 0;
  char name[256] = {};
  int version = 0;
  if (drv.cuDeviceGet(&device, 0) == CUDA_SUCCESS &&
      drv.cuDeviceGetName(name, sizeof name, device) == CUDA_SUCCESS)
    machine["gpu"] = std::string(name);
  if (drv.cuDriverGetVersion(&version) == CUDA_SUCCESS)
    machine["driver"] = fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
  return machine;
}

ScratchDir::ScratchDir(llvm::StringRef prefix) {
  llvm::SmallString<128> path;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory(prefix, path)) {
    llvm::errs() << "specjit-bench: cannot create a temporary directory: " << ec.message() << "\n";
    std::exit(1);
  }
  m_path = std::string(path);
}

ScratchDir::~ScratchDir() { llvm::sys::fs::remove_directories(m_path); }

double median(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

void write_json(llvm::raw_ostream& out, const llvm::json::Value& value, int indent) {
  const std::string pad(indent + 2, ' ');
  if (const llvm::json::Object* object = value.getAsObject()) {
    std::vector<llvm::StringRef> keys; // sorted, as llvm::json's own writer orders them
    for (const auto& field : *object)
      keys.push_back(field.first);
    std::sort(keys.begin(), keys.end());
    out << "{";
    for (size_t i = 0; i < keys.size(); ++i) {
      out << (i ? ",\n" : "\n") << pad << llvm::json::Value(keys[i].str()) << ": ";
      write_json(out, *object->get(keys[i]), indent + 2);
    }
    out << (keys.empty() ? "}" : "\n" + std::string(indent, ' ') + "}");
    return;
  }
  const llvm::json::Array* array = value.getAsArray();
  if (!array) {
    out << value;
    return;
  }
  // An array of numbers (or other plain values) on one line; one of objects or arrays, a line each.
  const bool flat = std::none_of(array->begin(), array->end(), [](const llvm::json::Value& v) {
    return v.getAsObject() || v.getAsArray();
  });
  out << "[";
  for (size_t i = 0; i < array->size(); ++i) {
    out << (i ? "," : "") << (flat ? (i ? " " : "") : "\n" + pad);
    write_json(out, (*array)[i], indent + 2);
  }
  out << (flat || array->empty() ? "]" : "\n" + std::string(indent, ' ') + "]");
}

bool write_report(const std::string& path, llvm::json::Object fields) {
  fields["machine"] = machine_description();
  llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path));
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec);
  if (ec) {
    llvm::errs() << "specjit-bench: cannot write " << path << ": " << ec.message() << "\n";
    return false;
  }
  write_json(out, llvm::json::Value(std::move(fields)));
  out << "\n";
  llvm::outs() << "full numbers: " << path << "\n";
  return true;
}

std::string Flags::get(const std::string& name, const std::string& fallback) const {
  for (const auto& [key, value] : values)
    if (key == name)
      return value;
  return fallback;
}

bool Flags::has(const std::string& name) const {
  return std::find(switches.begin(), switches.end(), name) != switches.end();
}

bool parse_flags(int argc, char** argv, int first, const std::vector<std::string>& with_value,
                 const std::vector<std::string>& switches, Flags& flags) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (std::find(switches.begin(), switches.end(), arg) != switches.end()) {
      flags.switches.push_back(arg);
      continue;
    }
    if (std::find(with_value.begin(), with_value.end(), arg) != with_value.end() && i + 1 < argc) {
      flags.values.emplace_back(arg, argv[++i]);
      continue;
    }
    llvm::errs() << "specjit-bench: unknown or incomplete flag '" << arg << "'\n";
    return false;
  }
  return true;
}

bool parse_count(const Flags& flags, const char* mode, const std::string& name, int64_t low,
                 int64_t high, int64_t fallback, int64_t& value) {
  const std::string given = flags.get(name, std::to_string(fallback));
  if (!llvm::StringRef(given).getAsInteger(10, value) && value >= low && value <= high)
    return true;
  llvm::errs() << fmt::format("specjit-bench {}: {} takes a count from {} to {}, not '{}'\n", mode,
                              name, low, high, given);
  return false;
}

void fail(const char* what, llvm::Error err) {
  llvm::errs() << "specjit-bench: " << what << ": " << llvm::toString(std::move(err)) << "\n";
  std::exit(1);
}

} // namespace specjit::bench
