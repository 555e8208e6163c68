// The JSON text of manifests (deploy/manifest.cpp): field paths, the line of every field,
// a nesting limit checked before parsing, and parse errors with their line and column.
#pragma once

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>

#include <map>
#include <string>

namespace specjit::deploy {

// "parent.key", or "key" at the top level.
std::string child_path(const std::string& parent, llvm::StringRef key);
// "parent[index]".
std::string element_path(const std::string& parent, size_t index);

// llvm::json keeps no positions: path ("variants[2].values.num_tokens") -> line of its key, from
// a second, small scan of the (already validated) text.
std::map<std::string, unsigned> field_lines(llvm::StringRef text);

// Refuses a key that appears twice in one object (llvm::json keeps one of them silently):
// "FILE:LINE: field 'variants[0].values.cols': duplicate key". On valid JSON only.
llvm::Error check_duplicate_keys(llvm::StringRef text, llvm::StringRef file_name);

// Refuses documents nested deeper than 64 levels, before llvm::json::parse recurses into them.
llvm::Error check_depth(llvm::StringRef text, llvm::StringRef file_name);

// llvm::json's parse error as "FILE:LINE:COLUMN: invalid JSON: MESSAGE".
llvm::Error syntax_error(llvm::Error cause, llvm::StringRef file_name);

} // namespace specjit::deploy
