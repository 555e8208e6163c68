// Sample entries shared by the cache tests.
#pragma once

#include "cache/entry_format.h"

#include <string>

namespace specjit::cache::test {

inline CacheKeyInputs sample_key_inputs(const std::string& kernel = "inv_rope_fp8_quant",
                                        int variant = 64) {
  CacheKeyInputs inputs;
  inputs.kernel = kernel;
  inputs.source_digest = hash128("kernel source of " + kernel);
  inputs.name_expression = kernel + "<" + std::to_string(variant) + ">";
  inputs.options = {"--std=c++17", "-DSPECJIT=1"};
  inputs.nvrtc_version = "12.4";
  inputs.arch = Arch{9, 0, true};
  inputs.policy_version = 1;
  return inputs;
}

inline EntryMetadata sample_metadata(const CacheKeyInputs& inputs) {
  EntryMetadata metadata;
  metadata.key_inputs = inputs;
  metadata.variant = llvm::json::Object{{"num_tokens", 64}};
  metadata.policies = llvm::json::Object{{"num_tokens", "exact"}};
  metadata.lowered_name = "_Z3kerILi64EEvv";
  metadata.compile_ms = 123.5;
  metadata.registers = 40;
  metadata.spill_bytes = 8;
  metadata.shared_bytes = 4096;
  metadata.warnings = {"warning: something harmless"};
  metadata.created = "2025-01-01T00:00:00Z";
  return metadata;
}

struct SampleEntry {
  CacheKeyInputs inputs;
  Digest128 key;
  std::string cubin;
  std::string bytes;
};

// A complete valid entry; `cubin_size` bytes of a recognizable pattern.
inline SampleEntry sample_entry(const std::string& kernel = "inv_rope_fp8_quant", int variant = 64,
                                size_t cubin_size = 256) {
  SampleEntry entry;
  entry.inputs = sample_key_inputs(kernel, variant);
  entry.key = cache_key(entry.inputs);
  entry.cubin.resize(cubin_size);
  for (size_t i = 0; i < cubin_size; ++i)
    entry.cubin[i] = static_cast<char>((i * 131 + variant) & 0xff);
  entry.bytes = encode_entry(entry.key, entry.cubin, sample_metadata(entry.inputs));
  return entry;
}

// The fault of a decode that must fail; fails the test when it succeeds.
inline std::optional<EntryFault> decode_fault(llvm::StringRef bytes,
                                              std::optional<Digest128> expected) {
  llvm::Expected<DecodedEntry> decoded = decode_entry(bytes, expected);
  if (decoded)
    return std::nullopt;
  std::optional<EntryFault> fault;
  llvm::handleAllErrors(decoded.takeError(),
                        [&](const EntryCorruptError& e) { fault = e.fault(); });
  return fault;
}

} // namespace specjit::cache::test
