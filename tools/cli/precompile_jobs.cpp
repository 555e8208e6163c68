#include "precompile_jobs.h"

#include "deploy/builtin_kernels.h"
#include "deploy/log_reader.h"
#include "deploy/manifest.h"
#include "deploy/reference_models.h"

#include "support/bounded_file.h"
#include "support/error.h"

#include <llvm/ADT/bit.h>

#include <fmt/format.h>

#include <map>
#include <set>

namespace specjit::cli {
namespace {

std::string identity(const Job& job, const std::string& target) {
  std::string text = fmt::format("{}|{}|{}", target, job.def.id, job.label);
  for (const runtime::ParamDef& param : job.def.params)
    text += "|" + param.policy.name();
  return text;
}

class Planner {
public:
  Planner(const std::vector<std::optional<Arch>>& arches, PlannedJobs& plan)
      : m_arches(arches), m_plan(plan) {}

  size_t target_index(const std::optional<Arch>& arch) {
    for (size_t i = 0; i < m_plan.targets.size(); ++i)
      if (m_plan.targets[i] == arch)
        return i;
    m_plan.targets.push_back(arch);
    return m_plan.targets.size() - 1;
  }

  // The targets a job goes to: every --arch, else `fallback`.
  std::vector<size_t> targets_for(const std::optional<Arch>& fallback) {
    std::vector<size_t> indices;
    if (m_arches.empty())
      indices.push_back(target_index(fallback));
    for (const std::optional<Arch>& arch : m_arches)
      indices.push_back(target_index(arch));
    return indices;
  }

  // Kernels the manifests define, for their variants and for --from-log; a kernel defined by
  // two manifests must be defined alike.
  llvm::Error define(const runtime::KernelDef& def, const std::string& manifest) {
    for (const auto& [known, where] : m_defined) {
      if (known.id != def.id)
        continue;
      if (known == def)
        return llvm::Error::success();
      return make_error(Errc::invalid_argument,
                        "{}: kernel '{}' is defined differently in {}; one id, one definition",
                        manifest, def.id, where);
    }
    m_defined.emplace_back(def, manifest);
    return llvm::Error::success();
  }
  const runtime::KernelDef* defined(llvm::StringRef id) const {
    for (const auto& [def, where] : m_defined)
      if (def.id == id)
        return &def;
    return nullptr;
  }

  // Adds the job once per target; a variant already planned for a target is skipped.
  void add(const Job& job, const std::vector<size_t>& targets) {
    for (size_t target : targets) {
      if (!m_seen.insert(identity(job, std::to_string(target))).second)
        continue;
      Job copy = job;
      copy.target = target;
      m_plan.jobs.push_back(std::move(copy));
    }
  }

private:
  const std::vector<std::optional<Arch>>& m_arches;
  PlannedJobs& m_plan;
  std::set<std::string> m_seen;
  std::vector<std::pair<runtime::KernelDef, std::string>> m_defined; // and the manifest's path
};

std::string label_of(const runtime::VariantRequest& request) {
  std::string label;
  for (size_t p = 0; p < request.def.params.size() && p < request.values.size(); ++p)
    label += fmt::format("{}{}={}", label.empty() ? "" : ", ", request.def.params[p].name,
                         request.values[p]);
  return label;
}

llvm::Error add_manifest(const std::string& path, Planner& planner) {
  auto text = read_regular_file(path, "manifest", k_max_manifest_bytes);
  if (!text)
    return text.takeError();
  auto manifest = deploy::parse_manifest_document(*text, path);
  if (!manifest)
    return manifest.takeError();
  for (const runtime::KernelDef& def : manifest->kernels)
    if (auto err = planner.define(def, path))
      return err;
  std::vector<size_t> targets = planner.targets_for(std::nullopt);
  for (const runtime::VariantRequest& request : manifest->variants)
    planner.add(Job{request.def, request.values, std::nullopt, 0, label_of(request)}, targets);
  return llvm::Error::success();
}

// The log records each variant's specialization but not the policy that chose it; any policy
// that yields the same specialization gives the same name expression, hence the same key.
runtime::Policy policy_for(const runtime::SpecValue& spec, const runtime::Policy& current) {
  using runtime::Policy;
  using runtime::PolicyKind;
  switch (spec.kind) {
  case runtime::SpecKind::dynamic:
    return Policy::dynamic();
  case runtime::SpecKind::exact:
    return Policy::exact();
  case runtime::SpecKind::bucketed:
    if (current.kind == PolicyKind::bucketed)
      return current;
    if (spec.argument == runtime::k_unbounded_bucket)
      return Policy::bucketed({0}, /*overflow=*/true);
    return llvm::isPowerOf2_64(static_cast<uint64_t>(spec.argument))
               ? Policy::bucketed_pow2()
               : Policy::bucketed({spec.argument});
  case runtime::SpecKind::divisible:
    return current.kind == PolicyKind::divisibility ? current : Policy::divisibility(spec.argument);
  case runtime::SpecKind::not_divisible:
    return current.kind == PolicyKind::divisibility ? current : Policy::divisibility(16);
  case runtime::SpecKind::one:
    return current.kind == PolicyKind::divisibility ? current : Policy::triton();
  }
  return current;
}

// Errors say why this build cannot rebuild the variant; the caller adds where. A kernel a
// manifest defines takes precedence: the parser keeps its ids apart from the built-in ones.
llvm::Expected<Job> replay_job(const deploy::LogEvent& event, const Planner& planner) {
  const runtime::KernelDef* user = planner.defined(event.kernel);
  std::optional<runtime::KernelDef> def = user ? std::optional<runtime::KernelDef>(*user)
                                               : deploy::find_kernel_definition(event.kernel);
  if (!def)
    return make_error(Errc::invalid_argument,
                      "not a kernel this build knows nor one a --manifest defines");
  Job job{*def, {}, std::vector<runtime::SpecValue>{}, 0, deploy::describe_variant(event.variant)};
  for (runtime::ParamDef& param : job.def.params) {
    const llvm::json::Value* value = event.variant.get(param.name);
    if (value == nullptr)
      return make_error(Errc::invalid_argument, "the logged variant lacks parameter '{}'",
                        param.name);
    // An enumeration's value is logged by its name.
    std::optional<int64_t> named;
    if (auto text = value->getAsString(); text && param.is_enum())
      named = param.enum_value(*text);
    auto spec = named ? llvm::Expected<runtime::SpecValue>(
                            runtime::SpecValue{runtime::SpecKind::exact, *named})
                      : runtime::SpecValue::parse(*value);
    if (!spec)
      return make_error(Errc::invalid_argument, "parameter '{}': {}", param.name,
                        llvm::toString(spec.takeError()));
    // A user kernel's template follows its policies (ParamDef::user), as when it was logged.
    runtime::Policy policy = policy_for(*spec, param.policy);
    // A built-in parameter keeps everything but its policy (an enumeration its names).
    if (user)
      param = runtime::ParamDef::user(param.name, std::move(policy));
    else
      param.policy = std::move(policy);
    job.specs->push_back(*spec);
  }
  if (event.variant.size() != job.def.params.size())
    for (const auto& [name, value] : event.variant)
      if (llvm::none_of(job.def.params,
                        [&](const runtime::ParamDef& param) { return param.name == name.str(); }))
        return make_error(Errc::invalid_argument,
                          "the logged variant has parameter '{}', which the definition lacks",
                          name.str());
  if (auto err = job.def.validate())
    return err;
  return job;
}

// One distinct variant of the log (kernel and key), with the architecture a compile of it
// named; disk_hit events name none.
struct LoggedVariant {
  deploy::LogEvent event;
  std::string where; // FILE:LINE of its first event
  std::string arch;
  size_t events = 0;
};

void note_skipped(PlannedJobs& plan, const LoggedVariant& logged, std::string reason) {
  for (SkippedKernel& s : plan.skipped)
    if (s.kernel == logged.event.kernel && s.reason == reason) {
      s.events += logged.events;
      return;
    }
  plan.skipped.push_back({logged.event.kernel, logged.events, std::move(reason), logged.where});
}

// Streams the log (rotated files too) keeping one event per distinct variant, so memory
// follows the number of variants, not the length of the log.
llvm::Error add_log(const std::string& path, Planner& planner, PlannedJobs& plan) {
  std::vector<LoggedVariant> variants;
  std::map<std::string, size_t> index;
  // Only the first event of each variant is decoded (variant_from_json below).
  deploy::LogReadOptions options;
  options.variants = options.diffs = false;
  auto scan = deploy::scan_log(path, [&](deploy::LogEvent&& event, llvm::StringRef file) {
    if (event.kind != deploy::EventKind::compile && event.kind != deploy::EventKind::disk_hit)
      return;
    std::string id = event.kernel + "|" + (event.key.empty() ? event.variant_json : event.key);
    auto [it, added] = index.try_emplace(id, variants.size());
    if (added) {
      std::string where = fmt::format("{}:{}", file.str(), event.line);
      event.variant = deploy::variant_from_json(event.variant_json);
      variants.push_back({std::move(event), std::move(where), "", 0});
    }
    LoggedVariant& logged = variants[it->second];
    ++logged.events;
    const std::string& arch = added ? logged.event.arch : event.arch;
    if (logged.arch.empty() && !arch.empty())
      logged.arch = arch;
  }, options);
  if (!scan)
    return scan.takeError();
  for (const LoggedVariant& logged : variants) {
    auto job = replay_job(logged.event, planner);
    if (!job) {
      note_skipped(plan, logged, llvm::toString(job.takeError()));
      continue;
    }
    // Replay for the architecture the run used, unless --arch says otherwise.
    std::optional<Arch> arch;
    if (!logged.arch.empty()) {
      auto parsed = Arch::parse(logged.arch);
      if (!parsed) {
        note_skipped(plan, logged, llvm::toString(parsed.takeError()));
        continue;
      }
      arch = *parsed;
    }
    planner.add(*job, planner.targets_for(arch));
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error plan_jobs(const Context& context, const std::vector<std::optional<Arch>>& arches,
                      PlannedJobs& plan) {
  Planner planner(arches, plan);
  std::vector<std::string> manifests = context.args.all("--manifest");
  std::vector<std::string> logs = context.args.all("--from-log");
  std::vector<std::string> models = context.args.all("--model");
  for (const std::string& path : manifests)
    if (auto err = add_manifest(path, planner))
      return err;
  for (const std::string& path : logs)
    if (auto err = add_log(path, planner, plan))
      return err;
  for (const std::string& name : models) {
    auto requests = deploy::reference_model_variants(name);
    if (!requests)
      return make_error(Errc::invalid_argument, "--model: {}",
                        llvm::toString(requests.takeError()));
    std::vector<size_t> targets = planner.targets_for(std::nullopt);
    for (const runtime::VariantRequest& request : *requests)
      planner.add(Job{request.def, request.values, std::nullopt, 0, label_of(request)}, targets);
  }
  if (manifests.empty() && logs.empty() && models.empty()) {
    std::vector<size_t> targets = planner.targets_for(std::nullopt);
    for (const runtime::VariantRequest& request : deploy::default_variants())
      planner.add(Job{request.def, request.values, std::nullopt, 0, label_of(request)}, targets);
  }
  if (plan.targets.empty()) // an empty manifest still reports the engine's architecture
    planner.targets_for(std::nullopt);
  return llvm::Error::success();
}

void merge_targets(PlannedJobs& plan, const std::vector<std::string>& arch_names,
                   std::vector<size_t>& kept_targets) {
  std::map<std::string, size_t> first_of;
  for (size_t i = 0; i < arch_names.size(); ++i)
    if (first_of.emplace(arch_names[i], i).second)
      kept_targets.push_back(i);
  std::set<std::string> seen;
  std::vector<Job> jobs;
  for (Job& job : plan.jobs) {
    job.target = first_of[arch_names[job.target]];
    if (seen.insert(identity(job, arch_names[job.target])).second)
      jobs.push_back(std::move(job));
  }
  plan.jobs = std::move(jobs);
}

} // namespace specjit::cli
