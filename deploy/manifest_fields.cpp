#include "deploy/manifest_fields.h"
#include "deploy/manifest_text.h"

#include "support/error.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/Support/Path.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace specjit::deploy {

std::string describe_kind(const llvm::json::Value& value) {
  switch (value.kind()) {
  case llvm::json::Value::Null:
    return "null";
  case llvm::json::Value::Boolean:
    return "a boolean";
  case llvm::json::Value::Number:
    return "a number";
  case llvm::json::Value::String:
    return "a string";
  case llvm::json::Value::Array:
    return "a list";
  case llvm::json::Value::Object:
    return "an object";
  }
  return "a value";
}

std::string ManifestFields::field_path(llvm::StringRef field) const {
  return field.empty() ? m_path : child_path(m_path, field);
}

std::string ManifestFields::resolve_path(llvm::StringRef name) const {
  if (llvm::sys::path::is_absolute(name))
    return name.str();
  llvm::SmallString<256> path = llvm::sys::path::parent_path(m_file);
  llvm::sys::path::append(path, name);
  return path.str().str();
}

unsigned ManifestFields::line_of(const std::string& path) const {
  // A missing field is reported at its object's line.
  for (std::string p = path;;) {
    if (auto it = m_lines->find(p); it != m_lines->end())
      return it->second;
    size_t cut = p.find_last_of(".[");
    if (cut == std::string::npos)
      return 1;
    p.resize(cut);
  }
}

llvm::Error ManifestFields::error(llvm::StringRef field, llvm::StringRef message) const {
  std::string path = field_path(field);
  return make_error(Errc::invalid_argument, "{}:{}: field '{}': {}", m_file, line_of(path),
                    path.empty() ? "(top level)" : path, message.str());
}

std::string ManifestFields::position(llvm::StringRef field) const {
  return fmt::format("{}:{}", m_file, line_of(field_path(field)));
}

llvm::Expected<std::optional<int64_t>> ManifestFields::optional_integer(llvm::StringRef field,
                                                                        int64_t minimum) const {
  const llvm::json::Value* value = m_object.get(field);
  if (value == nullptr)
    return std::nullopt;
  auto number = value->getAsInteger();
  if (!number)
    return error(field, fmt::format("expected an integer, found {}", describe_kind(*value)));
  if (*number < minimum)
    return error(field, fmt::format("expected an integer >= {}, found {}", minimum, *number));
  return std::optional<int64_t>(*number);
}

llvm::Expected<int64_t> ManifestFields::integer(llvm::StringRef field, int64_t minimum) const {
  auto number = optional_integer(field, minimum);
  if (!number)
    return number.takeError();
  if (!*number)
    return error(field, "missing (expected an integer)");
  return **number;
}

llvm::Expected<std::optional<std::string>>
ManifestFields::optional_string(llvm::StringRef field) const {
  const llvm::json::Value* value = m_object.get(field);
  if (value == nullptr)
    return std::nullopt;
  auto text = value->getAsString();
  if (!text)
    return error(field, fmt::format("expected a string, found {}", describe_kind(*value)));
  return text->str();
}

llvm::Expected<std::optional<std::vector<int64_t>>>
ManifestFields::optional_integers(llvm::StringRef field, int64_t minimum) const {
  const llvm::json::Value* value = m_object.get(field);
  if (value == nullptr)
    return std::nullopt;
  const llvm::json::Array* list = value->getAsArray();
  if (list == nullptr) {
    auto one = optional_integer(field, minimum);
    if (!one)
      return one.takeError();
    return std::vector<int64_t>{**one};
  }
  if (list->empty())
    return error(field, "expected an integer or a non-empty list of integers");
  std::vector<int64_t> numbers;
  for (size_t i = 0; i < list->size(); ++i) {
    auto number = (*list)[i].getAsInteger();
    std::string element = fmt::format("{}[{}]", field.str(), i);
    if (!number)
      return error(element,
                   fmt::format("expected an integer, found {}", describe_kind((*list)[i])));
    if (*number < minimum)
      return error(element, fmt::format("expected an integer >= {}, found {}", minimum, *number));
    numbers.push_back(*number);
  }
  return numbers;
}

llvm::Error ManifestFields::only(llvm::ArrayRef<llvm::StringRef> known) const {
  for (const auto& [key, value] : m_object) {
    if (llvm::is_contained(known, llvm::StringRef(key)))
      continue;
    std::vector<std::string> names(known.begin(), known.end());
    return error(key.str(),
                 fmt::format("unknown field; expected one of: {}", fmt::join(names, ", ")));
  }
  return llvm::Error::success();
}

llvm::Expected<std::optional<std::vector<std::string>>>
ManifestFields::optional_strings(llvm::StringRef field) const {
  const llvm::json::Value* value = m_object.get(field);
  if (value == nullptr)
    return std::nullopt;
  const llvm::json::Array* list = value->getAsArray();
  if (list == nullptr)
    return error(field, fmt::format("expected a list of strings, found {}", describe_kind(*value)));
  std::vector<std::string> strings;
  for (size_t i = 0; i < list->size(); ++i) {
    auto text = (*list)[i].getAsString();
    if (!text)
      return error(element_path(field.str(), i),
                   fmt::format("expected a string, found {}", describe_kind((*list)[i])));
    strings.push_back(text->str());
  }
  return strings;
}

llvm::Error ManifestFields::for_each_object(
    llvm::StringRef field, llvm::function_ref<llvm::Error(const ManifestFields&)> parse) const {
  const llvm::json::Value* value = m_object.get(field);
  if (value == nullptr)
    return llvm::Error::success();
  const llvm::json::Array* list = value->getAsArray();
  if (list == nullptr)
    return error(field, "expected a list of objects");
  for (size_t i = 0; i < list->size(); ++i) {
    std::string element = element_path(field.str(), i);
    const llvm::json::Object* object = (*list)[i].getAsObject();
    if (object == nullptr)
      return error(element, "expected an object");
    if (auto err = parse(nested(*object, element)))
      return err;
  }
  return llvm::Error::success();
}

} // namespace specjit::deploy
