#include "runtime/manifest.h"
#include "runtime/manifest_moe.h"
#include "runtime/manifest_text.h"

#include "runtime/ops/fused_moe.h"
#include "runtime/ops/inv_rope_fp8_quant.h"

#include "support/error.h"

#include <llvm/ADT/StringExtras.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

namespace specjit::runtime {

namespace {

// A list-valued field multiplies variants; a typo such as a 10^6-element list must not hang.
constexpr size_t k_max_requests = 100000;

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

} // namespace

std::optional<KernelDef> find_kernel_definition(llvm::StringRef id) {
  if (id == "scale_tokens")
    return scale_tokens_kernel();
  if (id == "inv_rope_fp8_quant")
    return ops::inv_rope_fp8_quant_kernel();
  if (const KernelDef* def = find_builtin_kernel(id))
    return *def;
  return std::nullopt;
}

std::vector<std::string> known_kernel_ids() {
  std::set<std::string> ids = {"scale_tokens", "inv_rope_fp8_quant"};
  for (const KernelDef& def : builtin_kernels())
    ids.insert(def.id);
  return {ids.begin(), ids.end()};
}

std::string ManifestFields::field_path(llvm::StringRef field) const {
  return field.empty() ? m_path : child_path(m_path, field);
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

namespace {

using Lines = std::map<std::string, unsigned>;

// Builds one request per combination of the listed values (a cartesian product).
llvm::Error expand(const KernelDef& def, const std::vector<std::vector<int64_t>>& lists,
                   const ManifestFields& at, std::vector<VariantRequest>& out) {
  size_t total = 1;
  for (const auto& list : lists) {
    total *= list.size();
    if (total > k_max_requests)
      return at.error("values",
                      fmt::format("lists expand to more than {} variants", k_max_requests));
  }
  std::vector<size_t> index(lists.size(), 0);
  for (size_t n = 0; n < total; ++n) {
    VariantRequest request{def, {}};
    for (size_t p = 0; p < lists.size(); ++p)
      request.values.push_back(lists[p][index[p]]);
    out.push_back(std::move(request));
    for (size_t p = lists.size(); p-- > 0;) { // odometer, last parameter fastest
      if (++index[p] < lists[p].size())
        break;
      index[p] = 0;
    }
  }
  return llvm::Error::success();
}

llvm::Error apply_policies(KernelDef& def, const ManifestFields& entry, const Lines& lines,
                           const std::string& file) {
  const llvm::json::Value* value = entry.object().get("policies");
  if (value == nullptr)
    return llvm::Error::success();
  const llvm::json::Object* policies = value->getAsObject();
  if (policies == nullptr)
    return entry.error("policies", "expected an object such as {\"num_tokens\": \"exact\"}");
  ManifestFields fields(*policies, entry.field_path("policies"), file, &lines);
  for (const auto& [key, text] : *policies) {
    auto param = llvm::find_if(def.params, [&](const ParamDef& p) { return p.name == key.str(); });
    if (param == def.params.end())
      return fields.error(key.str(),
                          fmt::format("kernel '{}' has no parameter of that name", def.id));
    auto name = text.getAsString();
    if (!name)
      return fields.error(key.str(), "expected a policy name such as \"exact\" or \"dynamic\"");
    auto policy = Policy::parse(*name);
    if (!policy)
      return fields.error(key.str(), llvm::toString(policy.takeError()));
    param->policy = std::move(*policy);
  }
  if (auto err = def.validate())
    return entry.error("policies", llvm::toString(std::move(err)));
  return llvm::Error::success();
}

llvm::Error parse_variant(const ManifestFields& entry, const Lines& lines, const std::string& file,
                          std::vector<VariantRequest>& out) {
  if (auto err = entry.only({"kernel", "values", "policies"}))
    return err;
  auto kernel = entry.optional_string("kernel");
  if (!kernel)
    return kernel.takeError();
  if (!*kernel)
    return entry.error("kernel", "missing (expected a kernel name)");
  std::optional<KernelDef> def = find_kernel_definition(**kernel);
  if (!def)
    return entry.error("kernel", fmt::format("unknown kernel '{}'; known kernels: {}", **kernel,
                                             fmt::join(known_kernel_ids(), ", ")));
  if (auto err = apply_policies(*def, entry, lines, file))
    return err;
  const llvm::json::Value* value = entry.object().get("values");
  const llvm::json::Object* values = value ? value->getAsObject() : nullptr;
  if (values == nullptr)
    return entry.error("values", "expected an object with one value per parameter");
  ManifestFields fields(*values, entry.field_path("values"), file, &lines);
  std::vector<llvm::StringRef> names;
  for (const ParamDef& param : def->params)
    names.push_back(param.name);
  if (auto err = fields.only(names))
    return err;
  std::vector<std::vector<int64_t>> lists;
  for (const ParamDef& param : def->params) {
    auto list = fields.optional_integers(param.name, 0);
    if (!list)
      return list.takeError();
    if (!*list)
      return fields.error(param.name, "missing (every parameter needs a value)");
    for (int64_t number : **list)
      if (auto spec = specialize(param.policy, number); !spec)
        return fields.error(param.name, llvm::toString(spec.takeError()));
    lists.push_back(std::move(**list));
  }
  return expand(*def, lists, entry, out);
}

// "models": [{"type": "inv_rope_fp8_quant", "groups": 8, "heads_per_group": 16,
//             "num_tokens_policy": "dynamic", "num_tokens": [1, 64]}]
// Under the default dynamic policy one variant serves every token count.
llvm::Error derive_inv_rope_fp8_quant(const ManifestFields& model,
                                      std::vector<VariantRequest>& out) {
  if (auto err =
          model.only({"type", "groups", "heads_per_group", "num_tokens_policy", "num_tokens"}))
    return err;
  auto groups = model.integer("groups", 1);
  if (!groups)
    return groups.takeError();
  auto heads = model.integer("heads_per_group", 1);
  if (!heads)
    return heads.takeError();
  auto policy_name = model.optional_string("num_tokens_policy");
  if (!policy_name)
    return policy_name.takeError();
  Policy policy = Policy::dynamic();
  if (*policy_name) {
    auto parsed = Policy::parse(**policy_name);
    if (!parsed)
      return model.error("num_tokens_policy", llvm::toString(parsed.takeError()));
    policy = std::move(*parsed);
  }
  auto tokens = model.optional_integers("num_tokens", 1);
  if (!tokens)
    return tokens.takeError();
  KernelDef def = ops::inv_rope_fp8_quant_kernel(policy);
  if (def.params.size() != 3) // template <int GROUPS, int HEADS_PER_GROUP, long long NUM_TOKENS>
    return model.error("type", "this build's inv_rope_fp8_quant kernel has an unexpected shape");
  for (int64_t count : tokens->value_or(std::vector<int64_t>{1})) {
    for (size_t p = 0; p < 3; ++p) {
      int64_t value = p == 0 ? *groups : p == 1 ? *heads : count;
      if (auto spec = specialize(def.params[p].policy, value); !spec)
        return model.error(p == 2   ? "num_tokens"
                           : p == 0 ? "groups"
                                    : "heads_per_group",
                           llvm::toString(spec.takeError()));
    }
    out.push_back({def, {*groups, *heads, count}});
  }
  return llvm::Error::success();
}

// Two requests are the same variant when their kernel, policies and specializations agree.
std::string identity(const VariantRequest& request) {
  std::string text = request.def.id;
  for (size_t p = 0; p < request.def.params.size() && p < request.values.size(); ++p) {
    const ParamDef& param = request.def.params[p];
    auto spec = specialize(param.policy, request.values[p]);
    int64_t word = spec ? spec->word() : request.values[p];
    if (!spec)
      llvm::consumeError(spec.takeError());
    text += fmt::format("|{}={}:{}", param.name, param.policy.name(), word);
  }
  return text;
}

using SectionParser = llvm::function_ref<llvm::Error(const ManifestFields&)>;

llvm::Error for_each_object(const ManifestFields& top, llvm::StringRef section, const Lines& lines,
                            const std::string& file, SectionParser parse) {
  const llvm::json::Value* value = top.object().get(section);
  if (value == nullptr)
    return llvm::Error::success();
  const llvm::json::Array* list = value->getAsArray();
  if (list == nullptr)
    return top.error(section, "expected a list of objects");
  for (size_t i = 0; i < list->size(); ++i) {
    std::string path = element_path(section.str(), i);
    const llvm::json::Object* object = (*list)[i].getAsObject();
    if (object == nullptr)
      return ManifestFields(top.object(), path, file, &lines).error("", "expected an object");
    if (auto err = parse(ManifestFields(*object, path, file, &lines)))
      return err;
  }
  return llvm::Error::success();
}

} // namespace

llvm::ArrayRef<ModelType> model_types() {
  static const ModelType k_types[] = {
      {"inv_rope_fp8_quant", derive_inv_rope_fp8_quant},
      {"moe", derive_moe_model},
  };
  return k_types;
}

llvm::Expected<std::vector<VariantRequest>> parse_manifest(llvm::StringRef text,
                                                           llvm::StringRef file_name) {
  std::string file = file_name.str();
  if (auto err = check_depth(text, file_name))
    return err;
  llvm::Expected<llvm::json::Value> root = llvm::json::parse(text);
  if (!root)
    return syntax_error(root.takeError(), file_name);
  if (auto err = check_duplicate_keys(text, file_name))
    return err;
  const Lines lines = field_lines(text);
  const llvm::json::Object* object = root->getAsObject();
  if (object == nullptr)
    return make_error(Errc::invalid_argument, "{}:1: expected a JSON object at the top level",
                      file);
  ManifestFields top(*object, "", file, &lines);
  if (auto err = top.only({"version", "variants", "models"}))
    return err;
  auto version = top.optional_integer("version", 0);
  if (!version)
    return version.takeError();
  if (*version && **version != k_manifest_version)
    return top.error("version", fmt::format("unsupported version {}; this build reads version {}",
                                            **version, k_manifest_version));
  std::vector<VariantRequest> requests;
  if (auto err = for_each_object(top, "variants", lines, file, [&](const ManifestFields& entry) {
        return parse_variant(entry, lines, file, requests);
      }))
    return err;
  if (auto err = for_each_object(top, "models", lines, file, [&](const ManifestFields& model) {
        auto type = model.optional_string("type");
        if (!type)
          return type.takeError();
        std::vector<std::string> names;
        for (const ModelType& known : model_types()) {
          names.push_back(known.type.str());
          if (*type && known.type == **type)
            return known.derive(model, requests);
        }
        return model.error("type",
                           fmt::format("{} model type; known types: {}",
                                       *type ? "unknown" : "missing", fmt::join(names, ", ")));
      }))
    return err;
  std::vector<VariantRequest> unique;
  std::set<std::string> seen;
  for (VariantRequest& request : requests) {
    if (seen.insert(identity(request)).second)
      unique.push_back(std::move(request));
    if (unique.size() > k_max_requests)
      return top.error("", fmt::format("more than {} variants", k_max_requests));
  }
  return unique;
}

} // namespace specjit::runtime
