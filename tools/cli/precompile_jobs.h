// What `specjit precompile` will do, decided before any compile: the targets (one engine per
// architecture) and one job per distinct variant and target, from manifests, logs or the
// built-in defaults.
#pragma once

#include "cli.h"

#include "runtime/kernel_def.h"

#include <optional>
#include <string>
#include <vector>

namespace specjit::cli {

struct Job {
  runtime::KernelDef def;
  std::vector<int64_t> values;                          // mapped through the policies, or
  std::optional<std::vector<runtime::SpecValue>> specs; // already decided (--from-log)
  size_t target = 0;                                    // index into PlannedJobs::targets
  std::string label;                                    // "cols=128, num_tokens=62"
};

// Events of a --from-log file that name a kernel this build cannot rebuild (unknown to it, or
// whose parameters changed): skipped, counted and named, never fatal.
struct SkippedKernel {
  std::string kernel;
  size_t events = 0;
  std::string reason;
  std::string first_at; // "FILE:LINE" of the first such event
};

struct PlannedJobs {
  std::vector<std::optional<Arch>> targets; // nullopt: the engine's own choice
  std::vector<Job> jobs;
  std::vector<SkippedKernel> skipped;
};

// Reads and validates every manifest and log named on the command line. Errors name the file
// and line; nothing has been compiled when one is returned. A log's events of kernels that
// cannot be rebuilt are skipped (plan.skipped), the rest replayed.
llvm::Error plan_jobs(const Context& context, const std::vector<std::optional<Arch>>& arches,
                      PlannedJobs& plan);

// Targets that turned out to compile for the same architecture (an engine's own choice equals
// an explicit one) become one: their jobs move to the first such target, duplicates dropped.
// kept_targets receives the indices of the targets still in use.
void merge_targets(PlannedJobs& plan, const std::vector<std::string>& arch_names,
                   std::vector<size_t>& kept_targets);

} // namespace specjit::cli
