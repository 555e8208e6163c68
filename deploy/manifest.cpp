#include "deploy/manifest.h"
#include "deploy/manifest_moe.h"
#include "deploy/manifest_source.h"
#include "deploy/manifest_text.h"

#include "ops/inv_rope/inv_rope_fp8_quant.h"
#include "ops/moe/fused_moe.h"
#include "runtime/test_kernel.h"

#include "support/error.h"

#include <llvm/ADT/StringExtras.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

namespace specjit::deploy {

using runtime::ParamDef;
using runtime::Policy;
using runtime::specialize;

namespace {

// A list-valued field multiplies variants; a typo such as a 10^6-element list must not hang.
constexpr size_t k_max_requests = 100000;

} // namespace

std::optional<KernelDef> find_kernel_definition(llvm::StringRef id) {
  if (id == "scale_tokens")
    return runtime::scale_tokens_kernel();
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

namespace {

using Lines = std::map<std::string, unsigned>;

// A variant's kernel: one the manifest defines (a user kernel, whose parameters follow
// ParamDef::user) or one specjit ships.
struct NamedKernel {
  KernelDef def;
  bool user = false;
};

std::optional<NamedKernel> find_named_kernel(llvm::StringRef id,
                                             const std::vector<KernelDef>& defined) {
  for (const KernelDef& def : defined)
    if (def.id == id)
      return NamedKernel{def, true};
  if (std::optional<KernelDef> def = find_kernel_definition(id))
    return NamedKernel{std::move(*def), false};
  return std::nullopt;
}

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

llvm::Error apply_policies(NamedKernel& kernel, const ManifestFields& entry) {
  KernelDef& def = kernel.def;
  const llvm::json::Value* value = entry.object().get("policies");
  if (value == nullptr)
    return llvm::Error::success();
  const llvm::json::Object* policies = value->getAsObject();
  if (policies == nullptr)
    return entry.error("policies", "expected an object such as {\"num_tokens\": \"exact\"}");
  ManifestFields fields = entry.nested(*policies, "policies");
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
    // A user kernel's template takes what its policies compile in, as at run time; a built-in
    // kernel's parameter keeps its encoding and enumerators, only the policy changes.
    if (kernel.user)
      *param = ParamDef::user(param->name, std::move(*policy));
    else
      param->policy = std::move(*policy);
  }
  if (auto err = def.validate())
    return entry.error("policies", llvm::toString(std::move(err)));
  return llvm::Error::success();
}

llvm::Error parse_variant(const ManifestFields& entry, const std::vector<KernelDef>& defined,
                          std::vector<VariantRequest>& out) {
  if (auto err = entry.only({"kernel", "values", "policies"}))
    return err;
  auto kernel = entry.optional_string("kernel");
  if (!kernel)
    return kernel.takeError();
  if (!*kernel)
    return entry.error("kernel", "missing (expected a kernel name)");
  std::optional<NamedKernel> named = find_named_kernel(**kernel, defined);
  if (!named) {
    std::vector<std::string> ids = known_kernel_ids();
    for (const KernelDef& def : defined)
      ids.push_back(def.id);
    std::sort(ids.begin(), ids.end());
    return entry.error("kernel", fmt::format("unknown kernel '{}'; known kernels: {}", **kernel,
                                             fmt::join(ids, ", ")));
  }
  if (auto err = apply_policies(*named, entry))
    return err;
  const KernelDef* def = &named->def;
  const llvm::json::Value* value = entry.object().get("values");
  const llvm::json::Object* values = value ? value->getAsObject() : nullptr;
  if (values == nullptr)
    return entry.error("values", "expected an object with one value per parameter");
  ManifestFields fields = entry.nested(*values, "values");
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

} // namespace

llvm::ArrayRef<ModelType> model_types() {
  static const ModelType k_types[] = {
      {"inv_rope_fp8_quant", derive_inv_rope_fp8_quant},
      {"moe", derive_moe_model},
  };
  return k_types;
}

namespace {

// "kernels": the manifest's own definitions, each id new (no built-in kernel's, no other entry's).
llvm::Error parse_kernels(const ManifestFields& top, std::vector<KernelDef>& defined) {
  std::vector<std::string> where;
  return top.for_each_object("kernels", [&](const ManifestFields& entry) -> llvm::Error {
    auto def = parse_manifest_kernel(entry);
    if (!def)
      return def.takeError();
    if (find_kernel_definition(def->id))
      return entry.error("id", fmt::format("'{}' is a kernel specjit ships; a kernel of the "
                                           "manifest needs an id of its own",
                                           def->id));
    for (size_t i = 0; i < defined.size(); ++i)
      if (defined[i].id == def->id)
        return entry.error("id",
                           fmt::format("kernel '{}' is already defined at {}", def->id, where[i]));
    if (auto err = check_manifest_kernel_files(entry, *def))
      return err;
    where.push_back(entry.position("id"));
    defined.push_back(std::move(*def));
    return llvm::Error::success();
  });
}

} // namespace

llvm::Expected<std::vector<VariantRequest>> parse_manifest(llvm::StringRef text,
                                                           llvm::StringRef file_name) {
  auto manifest = parse_manifest_document(text, file_name);
  if (!manifest)
    return manifest.takeError();
  return std::move(manifest->variants);
}

llvm::Expected<Manifest> parse_manifest_document(llvm::StringRef text, llvm::StringRef file_name) {
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
  if (auto err = top.only({"version", "kernels", "variants", "models"}))
    return err;
  auto version = top.optional_integer("version", 0);
  if (!version)
    return version.takeError();
  if (*version && **version != k_manifest_version)
    return top.error("version", fmt::format("unsupported version {}; this build reads version {}",
                                            **version, k_manifest_version));
  Manifest manifest;
  if (auto err = parse_kernels(top, manifest.kernels))
    return err;
  std::vector<VariantRequest> requests;
  if (auto err = top.for_each_object("variants", [&](const ManifestFields& entry) {
        return parse_variant(entry, manifest.kernels, requests);
      }))
    return err;
  if (auto err = top.for_each_object("models", [&](const ManifestFields& model) {
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
  std::set<std::string> seen;
  for (VariantRequest& request : requests) {
    if (seen.insert(identity(request)).second)
      manifest.variants.push_back(std::move(request));
    if (manifest.variants.size() > k_max_requests)
      return top.error("", fmt::format("more than {} variants", k_max_requests));
  }
  return manifest;
}

} // namespace specjit::deploy
