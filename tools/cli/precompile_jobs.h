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
  std::vector<int64_t> values;                            // mapped through the policies, or
  std::optional<std::vector<runtime::SpecValue>> specs;   // already decided (--from-log)
  size_t target = 0;                                      // index into PlannedJobs::targets
  std::string label;                                      // "cols=128, num_tokens=62"
};

struct PlannedJobs {
  std::vector<std::optional<Arch>> targets; // nullopt: the engine's own choice
  std::vector<Job> jobs;
};

// Reads and validates every manifest and log named on the command line. Errors name the file
// and line; nothing has been compiled when one is returned.
llvm::Error plan_jobs(const Context& context, const std::vector<std::optional<Arch>>& arches,
                      PlannedJobs& plan);

} // namespace specjit::cli
