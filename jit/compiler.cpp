#include "jit/compiler.h"

#include "jit/include_trace.h"
#include "jit/ptxas_report.h"
#include "jit/source_closure.h"
#include "support/error.h"

#include <nvrtc.h>

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/raw_ostream.h>

#include <fmt/format.h>

#include <chrono>

namespace specjit::jit {

char CompileError::ID = 0;

CompileError::CompileError(std::string stage, int nvrtc_result, std::string log,
                           std::vector<std::string> options, Arch arch, std::string name_expression)
    : m_stage(std::move(stage)), m_result(nvrtc_result), m_log(std::move(log)),
      m_options(std::move(options)), m_arch(arch), m_name_expression(std::move(name_expression)) {}

void CompileError::log(llvm::raw_ostream& os) const {
  if (!m_context.empty())
    os << m_context << "\n";
  os << m_stage << " failed (" << nvrtcGetErrorString(static_cast<nvrtcResult>(m_result))
     << ") for " << m_name_expression << " on " << m_arch.name();
  std::string trimmed = trim_log(m_log);
  if (!trimmed.empty())
    os << ":\n" << trimmed;
  os << "\noptions: " << llvm::join(m_options, " ");
}

std::error_code CompileError::convertToErrorCode() const {
  return make_error_code(Errc::compile_failed);
}

std::string trim_log(llvm::StringRef log, size_t max_lines) {
  llvm::SmallVector<llvm::StringRef, 32> lines;
  log.trim().split(lines, '\n');
  if (lines.size() == 1 && lines[0].empty())
    return {};
  std::string out;
  for (size_t i = 0; i < std::min(lines.size(), max_lines); ++i) {
    if (i)
      out += '\n';
    out += lines[i].rtrim().str();
  }
  if (lines.size() > max_lines)
    out += fmt::format("\n... ({} more lines)", lines.size() - max_lines);
  return out;
}

std::string NvrtcVersion::name() const {
  return std::to_string(major) + "." + std::to_string(minor);
}

NvrtcVersion nvrtc_version() {
  static const NvrtcVersion version = [] {
    NvrtcVersion v;
    if (nvrtcVersion(&v.major, &v.minor) != NVRTC_SUCCESS)
      v = {};
    return v;
  }();
  return version;
}

namespace {

bool sets_standard(llvm::ArrayRef<std::string> options) {
  return llvm::any_of(options, [](llvm::StringRef option) {
    return option.startswith("--std=") || option.startswith("-std=");
  });
}

} // namespace

std::vector<std::string> effective_options(const CompileRequest& request) {
  std::vector<std::string> options = {
      // NVRTC 13 accepts C++20; header-free kernels gain concepts and consteval from it.
      "--std=c++20",
      // A real architecture, never compute_XX: the cache stores cubins, which load in well
      // under a millisecond, where the driver would JIT PTX for ~100 ms per module.
      "--gpu-architecture=" + request.arch.name(),
      // ptxas' register / spill / shared-memory report lands in the log (parse_ptxas_report).
      "--ptxas-options=--verbose",
      // Kernel headers hold plain helper functions; NVRTC compiles no host code anyway.
      "-default-device",
  };
  // Some header trees want their own standard (CUTLASS: C++17); NVRTC takes one.
  if (sets_standard(request.options))
    options.erase(options.begin());
  llvm::append_range(options, request.options);
  return options;
}

// The architecture comes from request.arch, headers from the embedded sources or the request's
// headers and include directories (whose contents, not paths, the engine keys): an option that
// set them would make the output depend on something outside the request.
bool is_reserved_option(llvm::StringRef option) {
  return option.startswith("-I") || option.startswith("--include-path") ||
         option.startswith("--gpu-architecture") || option.startswith("-arch") ||
         option.startswith("--pre-include") || option == "-include";
}

namespace {

// What NVRTC is handed: the source and every in-memory header under each name it is included by.
// Copies cost nothing next to a compile and keep this independent of how the embedded table is
// generated.
struct ProgramText {
  std::string source;
  std::vector<HeaderFile> headers;
};

llvm::Expected<ProgramText> program_text(const CompileRequest& request) {
  if (request.source_text)
    return ProgramText{*request.source_text, request.headers};
  llvm::Expected<std::vector<ClosureFile>> closure = embedded_closure(request.source);
  if (!closure)
    return closure.takeError();
  ProgramText text{closure->front().file.text.str(), {}};
  for (const ClosureFile& header : llvm::ArrayRef(*closure).drop_front()) {
    text.headers.push_back({header.file.name.str(), header.file.text.str()});
    for (const std::string& alias : header.aliases)
      text.headers.push_back({alias, header.file.text.str()});
  }
  return text;
}

// Owns one nvrtcProgram and turns every nvrtcResult into an llvm::Error, in one place.
class Program {
public:
  Program(const CompileRequest& request, std::vector<std::string> options)
      : m_request(request), m_options(std::move(options)) {}
  ~Program() {
    if (m_program)
      nvrtcDestroyProgram(&m_program);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  llvm::Error create(const ProgramText& text);
  llvm::Error compile_program();
  llvm::Expected<std::string> lowered_name();
  llvm::Expected<std::string> cubin();
  // NVRTC's log; empty when the program does not exist or the log cannot be read.
  std::string program_log();

private:
  llvm::Error check(nvrtcResult result, const char* stage);

  const CompileRequest& m_request;
  std::vector<std::string> m_options;
  nvrtcProgram m_program = nullptr;
};

llvm::Error Program::check(nvrtcResult result, const char* stage) {
  if (result == NVRTC_SUCCESS)
    return llvm::Error::success();
  return llvm::make_error<CompileError>(stage, static_cast<int>(result), program_log(), m_options,
                                        m_request.arch, m_request.name_expression);
}

std::string Program::program_log() {
  size_t size = 0;
  if (!m_program || nvrtcGetProgramLogSize(m_program, &size) != NVRTC_SUCCESS || size == 0)
    return {};
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(m_program, log.data()) != NVRTC_SUCCESS)
    return {};
  log.resize(log.find('\0') == std::string::npos ? size : log.find('\0'));
  return log;
}

llvm::Error Program::create(const ProgramText& text) {
  std::vector<const char*> name_ptrs, text_ptrs;
  for (const HeaderFile& header : text.headers) {
    name_ptrs.push_back(header.name.c_str());
    text_ptrs.push_back(header.text.c_str());
  }
  if (llvm::Error error = check(nvrtcCreateProgram(&m_program, text.source.c_str(),
                                                   m_request.source.c_str(),
                                                   static_cast<int>(name_ptrs.size()),
                                                   text_ptrs.data(), name_ptrs.data()),
                                "nvrtcCreateProgram"))
    return error;
  return check(nvrtcAddNameExpression(m_program, m_request.name_expression.c_str()),
               "nvrtcAddNameExpression");
}

llvm::Error Program::compile_program() {
  std::vector<const char*> option_ptrs;
  for (const std::string& option : m_options)
    option_ptrs.push_back(option.c_str());
  return check(
      nvrtcCompileProgram(m_program, static_cast<int>(option_ptrs.size()), option_ptrs.data()),
      "nvrtcCompileProgram");
}

llvm::Expected<std::string> Program::lowered_name() {
  const char* lowered = nullptr;
  if (llvm::Error error =
          check(nvrtcGetLoweredName(m_program, m_request.name_expression.c_str(), &lowered),
                "nvrtcGetLoweredName"))
    return error;
  return std::string(lowered ? lowered : ""); // owned by the program: copy before destroying
}

llvm::Expected<std::string> Program::cubin() {
  size_t size = 0;
  if (llvm::Error error = check(nvrtcGetCUBINSize(m_program, &size), "nvrtcGetCUBINSize"))
    return error;
  std::string bytes(size, '\0');
  if (llvm::Error error = check(nvrtcGetCUBIN(m_program, bytes.data()), "nvrtcGetCUBIN"))
    return error;
  return bytes;
}

} // namespace

namespace {

llvm::Error check_request(const CompileRequest& request) {
  for (const std::string& option : request.options)
    if (is_reserved_option(option))
      return make_error(Errc::invalid_argument,
                        "NVRTC option '{}' is not allowed in a compile request: the architecture "
                        "comes from the request's arch, headers from the embedded sources or the "
                        "definition's include_dirs and headers (use include_dirs, not -I)",
                        option);
  if (!request.source_text && (!request.headers.empty() || !request.include_dirs.empty()))
    return make_error(Errc::invalid_argument,
                      "{}: in-memory headers and include directories need a source text",
                      request.source);
  return llvm::Error::success();
}

llvm::Error collect_output(Program& program, CompiledKernel& kernel) {
  kernel.log = program.program_log();
  llvm::Expected<std::string> lowered = program.lowered_name();
  if (!lowered)
    return lowered.takeError();
  kernel.lowered_name = std::move(*lowered);
  llvm::Expected<std::string> cubin = program.cubin();
  if (!cubin)
    return cubin.takeError();
  kernel.cubin = std::move(*cubin);
  kernel.resources = parse_ptxas_report(kernel.log, kernel.lowered_name);
  return llvm::Error::success();
}

} // namespace

llvm::Expected<CompiledKernel> compile(const CompileRequest& request) {
  auto start = std::chrono::steady_clock::now();
  if (llvm::Error error = check_request(request))
    return error;
  llvm::Expected<ProgramText> text = program_text(request);
  if (!text)
    return text.takeError();

  std::vector<std::string> options = effective_options(request);
  for (const std::string& dir : request.include_dirs)
    options.push_back("--include-path=" + dir);
  std::optional<IncludeTrace> trace;
  if (!request.include_dirs.empty()) {
    llvm::Expected<IncludeTrace> created = IncludeTrace::create();
    if (!created)
      return created.takeError();
    trace.emplace(std::move(*created));
    options.push_back(trace->option());
  }
  Program program(request, std::move(options));
  if (llvm::Error error = program.create(*text))
    return error;
  if (llvm::Error error = program.compile_program())
    return error;
  CompiledKernel kernel;
  if (llvm::Error error = collect_output(program, kernel))
    return error;
  if (trace) {
    std::vector<std::string> in_memory;
    for (const HeaderFile& header : request.headers)
      in_memory.push_back(header.name);
    llvm::Expected<std::vector<std::string>> files = trace->included_files(in_memory);
    if (!files)
      return files.takeError();
    kernel.included_files = std::move(*files);
  }
  kernel.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return kernel;
}

} // namespace specjit::jit
