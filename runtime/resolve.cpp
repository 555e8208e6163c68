// The Engine's slow path: a variant missing from memory is read from the disk layers, or
// compiled (and published), and every step is written to the recompilation log.
#include "runtime/engine_impl.h"

#include "jit/compiler.h"
#include "support/error.h"
#include "support/logging.h"

#include <chrono>
#include <fmt/format.h>

namespace specjit::runtime {

namespace {

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

std::string name_expression(const KernelDef& def, llvm::ArrayRef<SpecValue> specs) {
  std::string text = def.function + "<";
  bool first = true;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (def.params[i].encoding == ParamEncoding::none)
      continue; // a plain kernel argument
    if (!first)
      text += ", ";
    first = false;
    const ParamDef& param = def.params[i];
    // make_key and prepare_specialized keep an enumeration's values among its names.
    if (param.is_enum())
      text += param.enum_type + "::" + param.enum_names[static_cast<size_t>(specs[i].raw())];
    else if (param.encoding == ParamEncoding::raw)
      text += std::to_string(specs[i].raw());
    else
      text += std::to_string(specs[i].word()) + "LL";
  }
  return text + ">";
}

llvm::json::Value describe(const ParamDef& param, const SpecValue& spec) {
  // A raw divisibility flag shows as its class ("%16", "any", "1"), as a spec word does.
  bool flag = param.policy.kind == PolicyKind::divisibility;
  if (param.is_enum())
    return param.enum_names[static_cast<size_t>(spec.raw())];
  if ((param.encoding == ParamEncoding::raw && !flag) || spec.kind == SpecKind::exact)
    return spec.argument;
  return spec.describe();
}

llvm::json::Object variant_object(const KernelDef& def, llvm::ArrayRef<SpecValue> specs) {
  llvm::json::Object object;
  for (size_t i = 0; i < specs.size(); ++i)
    object[def.params[i].name] = describe(def.params[i], specs[i]);
  return object;
}

// "num_tokens (dynamic, not a template parameter), block (exact)": what a compile error of a
// name expression that does not fit the template is measured against.
std::string declared_params(const KernelDef& def) {
  std::string text;
  for (const ParamDef& param : def.params) {
    if (!text.empty())
      text += ", ";
    text += param.name + " (" + param.policy.name();
    if (param.encoding == ParamEncoding::none)
      text += ", not a template parameter";
    text += ")";
  }
  return text.empty() ? "none" : text;
}

llvm::json::Object policies_object(const KernelDef& def) {
  llvm::json::Object object;
  for (const ParamDef& param : def.params)
    object[param.name] = param.policy.name();
  return object;
}

std::string value_text(const llvm::json::Value* value) {
  if (value == nullptr)
    return "(none)";
  if (auto text = value->getAsString())
    return text->str();
  std::string out;
  llvm::raw_string_ostream os(out);
  os << *value;
  return os.str();
}

struct Explanation {
  std::string reason;
  llvm::json::Array diff;
};

// Explains a compile against the nearest variant of the same kernel this process knows of
// (from the disk layers, loaded once per kernel, and its own compiles).
Explanation explain(const KernelState& kernel, const cache::CacheKeyInputs& requested,
                    const llvm::json::Object& variant, bool corrupt) {
  Explanation result;
  const KnownVariant* nearest = nullptr;
  std::vector<cache::ComponentDiff> nearest_diff;
  for (const KnownVariant& known : kernel.known) {
    std::vector<cache::ComponentDiff> diff = cache::diff_components(known.inputs, requested);
    if (nearest == nullptr || diff.size() <= nearest_diff.size()) {
      nearest = &known;
      nearest_diff = std::move(diff);
    }
  }
  if (nearest == nullptr) {
    result.reason = corrupt ? "corrupt_entry" : "first_use";
    return result;
  }
  bool source = false, options = false, compiler = false;
  for (const cache::ComponentDiff& d : nearest_diff) {
    source |= d.component == "source_digest";
    options |= d.component == "options";
    compiler |= d.component == "nvrtc_version";
    if (d.component != "name_expression") {
      result.diff.push_back(llvm::json::Object{
          {"component", d.component}, {"cached", d.cached}, {"requested", d.requested}});
      continue;
    }
    // A different name expression means different template arguments: name them.
    for (const auto& [name, value] : variant) {
      const llvm::json::Value* cached = nearest->variant.get(name);
      if (cached != nullptr && value_text(cached) == value_text(&value))
        continue;
      std::string policy;
      for (const ParamDef& param : kernel.def.params)
        if (param.name == name.str())
          policy = param.policy.name();
      result.diff.push_back(llvm::json::Object{{"component", name.str()},
                                               {"cached", value_text(cached)},
                                               {"requested", value_text(&value)},
                                               {"policy", policy}});
    }
  }
  result.reason = corrupt      ? "corrupt_entry"
                  : source     ? "source_changed"
                  : options    ? "options_changed"
                  : compiler   ? "compiler_changed"
                               : "new_variant";
  return result;
}

} // namespace

namespace {

struct Request {
  KernelState& kernel;
  cache::CacheKeyInputs inputs;
  Digest128 key;
  llvm::json::Object variant;
  llvm::ArrayRef<SpecValue> specs;
};

llvm::json::Object event_base(llvm::StringRef name, const Request& request) {
  // The policies ride along so that `specjit precompile --from-log` can rebuild the exact
  // definition that produced the variant.
  return llvm::json::Object{{"event", name.str()},
                            {"kernel", request.kernel.def.id},
                            {"variant", llvm::json::Object(request.variant)},
                            {"policies", policies_object(request.kernel.def)},
                            {"key", request.key.hex()}};
}

} // namespace

// Remembers a variant for explanations and counts distinct values of exact parameters; emits a
// storm event the first time one parameter passes the threshold.
// Only compiles count toward a storm: a process that loads its variants from disk or the remote
// recompiles nothing, however many exact values it sees.
enum class VariantOrigin { compiled, loaded };

static void note_variant(Engine::Impl& engine, const Request& request, VariantOrigin origin) {
  KernelState& kernel = request.kernel;
  std::vector<std::pair<std::string, size_t>> storms;
  {
    std::lock_guard<std::mutex> lock(kernel.mutex);
    kernel.known.push_back({request.inputs, llvm::json::Object(request.variant)});
    for (size_t i = 0; origin == VariantOrigin::compiled && i < request.specs.size(); ++i) {
      const ParamDef& param = kernel.def.params[i];
      if (param.policy.kind != PolicyKind::exact)
        continue;
      auto& values = kernel.exact_values[param.name];
      values.insert(request.specs[i].argument);
      if (values.size() > static_cast<size_t>(engine.config.storm_threshold.value) &&
          kernel.storm_reported.insert(param.name).second)
        storms.emplace_back(param.name, values.size());
    }
  }
  for (auto& [param, count] : storms) {
    engine.counters.storms.fetch_add(1, std::memory_order_relaxed);
    llvm::json::Object event = event_base("storm", request);
    event["param"] = param;
    event["distinct_values"] = static_cast<int64_t>(count);
    event["suggestion"] = fmt::format("declare {} dynamic or bucketed", param);
    engine.log.write(std::move(event));
    log_warning(llvm::Twine("kernel ") + kernel.def.id + ": parameter " + param + " has taken " +
                llvm::Twine(count) + " distinct values under policy exact (a recompile storm); " +
                "declare it dynamic or bucketed");
  }
}

static void load_index(Engine::Impl& engine, KernelState& kernel) {
  std::lock_guard<std::mutex> lock(kernel.mutex);
  if (kernel.index_loaded)
    return;
  kernel.index_loaded = true;
  for (cache::ListedEntry& entry : engine.store.list(llvm::StringRef(kernel.def.id)))
    if (entry.metadata)
      kernel.known.push_back({entry.metadata->key_inputs, std::move(entry.metadata->variant)});
}

static void fill_from_entry(const cache::DecodedEntry& entry, VariantSource source, Variant& out) {
  out.cubin = entry.cubin.str();
  out.lowered_name = entry.metadata.lowered_name;
  out.registers = entry.metadata.registers;
  out.spill_bytes = entry.metadata.spill_bytes;
  out.warnings = entry.metadata.warnings;
  out.shared_bytes = entry.metadata.shared_bytes;
  out.compile_ms = entry.metadata.compile_ms;
  out.source = source;
}

// The fleet tier (runtime/remote_tier.h) found a verified entry: use it.
static bool take_remote(Engine::Impl& engine, const Request& request,
                        std::optional<RemoteEntry> found, Variant& out) {
  if (!found)
    return false;
  fill_from_entry(found->entry, VariantSource::remote, out);
  engine.counters.remote_hits.fetch_add(1, std::memory_order_relaxed);
  note_variant(engine, request, VariantOrigin::loaded);
  return true;
}

// Looks the key up in the disk layers. Corrupt entries met on the way are counted and logged,
// each path once per request: a bad entry in a read-only layer cannot be moved aside, so the
// second look after taking the compile lock meets it again.
static bool try_disk(Engine::Impl& engine, const Request& request, Variant& out, bool& corrupt,
                     std::set<std::string>& reported) {
  auto start = std::chrono::steady_clock::now();
  cache::LookupResult result = engine.store.lookup(request.key, request.kernel.def.id);
  for (const cache::CorruptFinding& finding : result.corrupt) {
    corrupt = true;
    if (!reported.insert(finding.path).second)
      continue;
    engine.counters.corrupt_entries.fetch_add(1, std::memory_order_relaxed);
    llvm::json::Object event = event_base("entry_corrupt", request);
    event["path"] = finding.path;
    event["detail"] = fmt::format("{}: {}", cache::entry_fault_name(finding.fault).str(),
                                  finding.detail);
    event["moved_aside"] = finding.moved_aside;
    engine.log.write(std::move(event));
  }
  if (!result.hit)
    return false;
  fill_from_entry(result.hit->entry, VariantSource::disk, out);
  engine.counters.disk_hits.fetch_add(1, std::memory_order_relaxed);
  llvm::json::Object event = event_base("disk_hit", request);
  event["ms"] = milliseconds_since(start);
  event["layer"] = static_cast<int64_t>(result.hit->location.layer);
  event["arch"] = request.inputs.arch.name();
  engine.log.write(std::move(event));
  note_variant(engine, request, VariantOrigin::loaded);
  return true;
}

// Counts and logs a failed write; `out.not_saved` tells precompile why the variant is not saved.
static void note_write_failure(Engine::Impl& engine, const Request& request,
                               const std::string& path, llvm::Error error, Variant& out) {
  engine.counters.write_failures.fetch_add(1, std::memory_order_relaxed);
  llvm::json::Object event = event_base("write_failed", request);
  event["path"] = path;
  out.not_saved = llvm::toString(std::move(error));
  event["detail"] = out.not_saved;
  engine.log.write(std::move(event));
}

static cache::EntryMetadata metadata_for(const Request& request, const jit::CompiledKernel& c) {
  cache::EntryMetadata metadata;
  metadata.key_inputs = request.inputs;
  metadata.variant = llvm::json::Object(request.variant);
  metadata.policies = policies_object(request.kernel.def);
  metadata.lowered_name = c.lowered_name;
  metadata.compile_ms = c.compile_ms;
  metadata.registers = c.resources.registers;
  metadata.spill_bytes = c.resources.spill_bytes();
  metadata.shared_bytes = c.resources.shared_bytes;
  metadata.warnings = c.resources.warnings;
  metadata.created = utc_timestamp_now();
  return metadata;
}

namespace {

void fill_from_compile(Variant& out, jit::CompiledKernel& compiled,
                       const cache::EntryMetadata& metadata) {
  out.cubin = std::move(compiled.cubin);
  out.lowered_name = compiled.lowered_name;
  out.registers = metadata.registers;
  out.spill_bytes = metadata.spill_bytes;
  out.warnings = metadata.warnings;
  out.shared_bytes = metadata.shared_bytes;
  out.compile_ms = compiled.compile_ms;
  out.source = VariantSource::compiled;
}

// A header that changed since the stored dependency set was written: the reason of the first
// compile after the check names it (later compiles of the definition are new variants).
void add_header_change(KernelState& kernel, Explanation& explanation) {
  if (!kernel.header_change)
    return;
  HeaderChange change = std::move(*kernel.header_change);
  kernel.header_change.reset();
  explanation.reason = "header_changed";
  explanation.diff.push_back(llvm::json::Object{{"component", "header"},
                                                {"name", change.name},
                                                {"cached", change.cached},
                                                {"requested", change.requested}});
}

// Points the request at a source digest: the key follows.
void set_source_digest(Request& request, const Digest128& digest) {
  request.inputs.source_digest = digest;
  request.key = cache::cache_key(request.inputs);
}

} // namespace

// After seal(): a warning, or under SPECJIT_STRICT=error a refusal (logged).
static llvm::Error refuse_when_strict(Engine::Impl& engine, const Request& request,
                                      const std::string& name, const std::string& phase) {
  if (!engine.sealed.load())
    return llvm::Error::success();
  if (engine.config.strict.value == StrictMode::warn)
    log_warning(llvm::Twine("compiling kernel ") + request.kernel.def.id + " variant " + name +
                " after the engine was sealed");
  if (engine.config.strict.value != StrictMode::error)
    return llvm::Error::success();
  llvm::json::Object event = event_base("compile_failed", request);
  event["log"] = "refused: the engine is sealed and SPECJIT_STRICT=error";
  event["phase"] = phase;
  engine.log.write(std::move(event));
  return make_error(Errc::strict_violation,
                    "kernel {} variant {} is not in the cache and the engine is sealed "
                    "(SPECJIT_STRICT=error): precompile it into the image",
                    request.kernel.def.id, name);
}

llvm::Error Engine::Impl::resolve(KernelState& kernel, llvm::ArrayRef<SpecValue> specs,
                                  Variant& out) {
  const KernelDef& def = kernel.def;
  jit::CompileRequest compile_request = kernel.prepared.request;
  compile_request.name_expression = name_expression(def, specs);
  compile_request.arch = arch();
  // Without a settled dependency set the key is not known before the compile: the request
  // carries the definition digest, whose key serves as the compile lock's name.
  std::optional<Digest128> digest = settled_source_digest(kernel, /*look_again=*/false);
  cache::CacheKeyInputs inputs{def.id,
                               digest.value_or(kernel.prepared.definition_digest),
                               compile_request.name_expression,
                               jit::effective_options(compile_request),
                               jit::nvrtc_version().name(),
                               compile_request.arch,
                               k_policy_version,
                               cache::k_entry_format_version};
  Request request{kernel, inputs, cache::cache_key(inputs), variant_object(def, specs), specs};
  out.kernel_name = def.id;
  out.name_expression = compile_request.name_expression;
  out.key = request.key;
  out.variant = llvm::json::Object(request.variant);

  bool corrupt = false;
  std::set<std::string> reported;
  if (digest && try_disk(*this, request, out, corrupt, reported))
    return llvm::Error::success();
  if (remote && take_remote(*this, request,
                            remote->fetch(request.key, event_base("remote", request)), out))
    return llvm::Error::success();
  // Another process may be compiling this key: wait for it, then look again. Only an
  // optimisation: without the lock both compile and publish identical bytes.
  const auto lock_start = std::chrono::steady_clock::now();
  cache::CompileLock lock = store.writable() ? store.lock_for_compile(request.key)
                                             : cache::CompileLock();
  const auto lock_time = std::chrono::steady_clock::now() - lock_start;
  if (lock.acquired() && !digest && (digest = settled_source_digest(kernel, true))) {
    set_source_digest(request, *digest);
    out.key = request.key;
  }
  const bool published_meanwhile =
      lock.acquired() && digest && try_disk(*this, request, out, corrupt, reported);
  if (store.writable())
    counters.note_lock_take(lock_time, published_meanwhile || !lock.acquired());
  if (published_meanwhile)
    return llvm::Error::success();
  // The same across the fleet: wait for the node compiling it, or hold the fleet lock.
  RemoteTier::Flight flight;
  if (remote && !(sealed.load() && config.strict.value == StrictMode::error)) {
    flight = remote->single_flight(request.key, event_base("remote", request));
    if (take_remote(*this, request, std::move(flight.entry), out))
      return llvm::Error::success();
  }

  std::string phase = sealed.load() ? "serving" : "warmup";
  if (llvm::Error error = refuse_when_strict(*this, request, out.name_expression, phase))
    return error;
  auto compiled = jit::compile(compile_request);
  if (compiled && kernel.prepared.has_include_dirs()) {
    llvm::Expected<Digest128> traced = record_dependencies(kernel, compiled->included_files);
    if (!traced)
      compiled = traced.takeError();
    else
      set_source_digest(request, *traced);
    out.key = request.key;
  }
  if (!compiled) {
    // The message goes to the log; the error keeps its type (a jit::CompileError stays one,
    // a SpecjitError its code), the kernel and variant put in front of its message.
    const std::string context =
        fmt::format("kernel {} variant {} (declared parameters: {}):", def.id, out.name_expression,
                    declared_params(def));
    std::string message;
    llvm::Error error = llvm::handleErrors(
        compiled.takeError(),
        [&](std::unique_ptr<jit::CompileError> part) -> llvm::Error {
          message += (message.empty() ? "" : "\n") + part->message();
          part->set_context(context);
          return llvm::Error(std::move(part));
        },
        [&](std::unique_ptr<SpecjitError> part) -> llvm::Error {
          message += (message.empty() ? "" : "\n") + part->message();
          return make_error(part->code(), context + "\n" + part->message());
        });
    llvm::json::Object event = event_base("compile_failed", request);
    event["log"] = message.size() > 4000 ? message.substr(0, 4000) + "..." : message;
    event["phase"] = phase;
    log.write(std::move(event));
    return error;
  }
  load_index(*this, kernel);
  Explanation explanation;
  {
    std::lock_guard<std::mutex> guard(kernel.mutex);
    explanation = explain(kernel, request.inputs, request.variant, corrupt);
    add_header_change(kernel, explanation);
  }
  cache::EntryMetadata metadata = metadata_for(request, *compiled);
  std::string bytes = cache::encode_entry(request.key, compiled->cubin, metadata);
  if (store.writable()) {
    if (auto err = store.publish(request.key, def.id, bytes))
      note_write_failure(*this, request, store.entry_path(request.key, def.id), std::move(err),
                         out);
    else if (kernel.prepared.has_include_dirs())
      if (auto err = publish_dependencies(kernel))
        note_write_failure(*this, request, "deps/" + kernel.prepared.definition_digest.hex(),
                           std::move(err), out);
  } else {
    out.not_saved = "the cache cannot be written: " + store.unusable_reason();
  }
  if (remote)
    remote->push(request.key, bytes, event_base("remote", request));
  fill_from_compile(out, *compiled, metadata);
  counters.compiles.fetch_add(1, std::memory_order_relaxed);

  llvm::json::Object event = event_base("compile", request);
  event["ms"] = compiled->compile_ms;
  event["arch"] = compile_request.arch.name();
  event["nvrtc"] = request.inputs.nvrtc_version;
  event["reason"] = explanation.reason;
  event["diff"] = std::move(explanation.diff);
  event["phase"] = phase;
  log.write(std::move(event));
  note_variant(*this, request, VariantOrigin::compiled);
  return llvm::Error::success();
}

} // namespace specjit::runtime
