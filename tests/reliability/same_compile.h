// Whether a cubin handed out is the compile of the key whose reference compile is `reference`.
//
// NVRTC output is not byte-reproducible across processes: a namespace-scope constexpr with
// internal linkage (e.g. k_spec_base in kernels_src/common/spec.cuh) is emitted under a name
// like _ZN51_INTERNAL_00000000_15_scale_tokens_cu_b5ebf50e_1424..., where the last number is
// the compiling process's id and the hash varies too. So two compiles of one key may differ,
// but only inside such names. Bytes are compared exactly outside the `_INTERNAL_` names; when
// a differing number of pid digits changes the names' lengths (and so shifts the rest of the
// ELF file), the files are compared with those names removed, and that weaker comparison is
// counted apart (`length_varied`) so a run shows how often it was needed.
#pragma once

#include <llvm/ADT/StringRef.h>

#include <string>
#include <vector>

namespace specjit::reliability {

enum class Sameness { identical, same_but_internal_names, same_but_name_lengths, different };

// [begin, end) of every _INTERNAL_ name (from its mangled length prefix to the NUL).
inline std::vector<std::pair<size_t, size_t>> internal_names(llvm::StringRef bytes) {
  std::vector<std::pair<size_t, size_t>> spans;
  size_t at = 0;
  while ((at = bytes.find("_INTERNAL_", at)) != llvm::StringRef::npos) {
    size_t begin = at;
    while (begin > 0 && bytes[begin - 1] != '\0' && begin + 64 > at)
      --begin;
    size_t end = bytes.find('\0', at);
    if (end == llvm::StringRef::npos)
      end = bytes.size();
    spans.emplace_back(begin, end);
    at = end;
  }
  return spans;
}

inline std::string without_internal_names(llvm::StringRef bytes) {
  std::string out;
  size_t from = 0;
  for (auto [begin, end] : internal_names(bytes)) {
    out.append(bytes.data() + from, begin - from);
    from = end;
  }
  out.append(bytes.data() + from, bytes.size() - from);
  return out;
}

inline Sameness compare_compiles(llvm::StringRef handed, llvm::StringRef reference) {
  if (handed == reference)
    return Sameness::identical;
  auto a = internal_names(handed), b = internal_names(reference);
  if (a.size() != b.size() || a.empty())
    return Sameness::different;
  if (handed.size() == reference.size()) {
    // Every differing byte must lie inside one of the names, at the same place in both.
    if (a != b)
      return Sameness::different;
    size_t span = 0;
    for (size_t i = 0; i < handed.size(); ++i) {
      if (handed[i] == reference[i])
        continue;
      while (span < a.size() && a[span].second <= i)
        ++span;
      if (span == a.size() || i < a[span].first)
        return Sameness::different;
    }
    return Sameness::same_but_internal_names;
  }
  // Name lengths differ: the rest is shifted; compare what is left without the names, in size.
  std::string x = without_internal_names(handed), y = without_internal_names(reference);
  return x.size() == y.size() ? Sameness::same_but_name_lengths : Sameness::different;
}

} // namespace specjit::reliability
