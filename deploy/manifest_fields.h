// Reading one JSON object of a precompile manifest (deploy/manifest.h): typed fields whose
// errors name the manifest, the line of the field (or of its object when it is missing) and the
// field's path, e.g. "m.json:7: field 'kernels[0].params[1].policy': ...".
#pragma once

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/JSON.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace specjit::deploy {

// "a string", "a list", ...: what a value of the wrong type was, for messages.
std::string describe_kind(const llvm::json::Value& value);

class ManifestFields {
public:
  ManifestFields(const llvm::json::Object& object, std::string path, std::string file_name,
                 const std::map<std::string, unsigned>* lines)
      : m_object(object), m_path(std::move(path)), m_file(std::move(file_name)), m_lines(lines) {}

  const llvm::json::Object& object() const { return m_object; }
  const std::string& path() const { return m_path; }
  const std::string& file() const { return m_file; } // the manifest's file name, as given
  std::string field_path(llvm::StringRef field) const;
  // A path the manifest names: relative ones are taken from the manifest's folder.
  std::string resolve_path(llvm::StringRef name) const;
  // The fields of a nested object: `field` is its name in this object ("values") or an
  // element path relative to it ("params[2]").
  ManifestFields nested(const llvm::json::Object& object, llvm::StringRef field) const {
    return ManifestFields(object, field_path(field), m_file, m_lines);
  }

  llvm::Expected<int64_t> integer(llvm::StringRef field, int64_t minimum) const;
  llvm::Expected<std::optional<int64_t>> optional_integer(llvm::StringRef field,
                                                          int64_t minimum) const;
  llvm::Expected<std::optional<std::string>> optional_string(llvm::StringRef field) const;
  // A list of integers, or one integer (a list of one).
  llvm::Expected<std::optional<std::vector<int64_t>>> optional_integers(llvm::StringRef field,
                                                                        int64_t minimum) const;
  // A list of strings (possibly empty); nullopt when the field is absent.
  llvm::Expected<std::optional<std::vector<std::string>>>
  optional_strings(llvm::StringRef field) const;
  // Calls `parse` for each element of the list `field` (absent: none), each an object.
  llvm::Error for_each_object(llvm::StringRef field,
                              llvm::function_ref<llvm::Error(const ManifestFields&)> parse) const;
  // Fails when the object has a field not in `known`.
  llvm::Error only(llvm::ArrayRef<llvm::StringRef> known) const;

  // "FILE:LINE: field 'PATH': MESSAGE" for a field of this object.
  llvm::Error error(llvm::StringRef field, llvm::StringRef message) const;
  // "FILE:LINE" of a field of this object.
  std::string position(llvm::StringRef field) const;

private:
  unsigned line_of(const std::string& path) const;

  const llvm::json::Object& m_object;
  std::string m_path;
  std::string m_file;
  const std::map<std::string, unsigned>* m_lines;
};

} // namespace specjit::deploy
