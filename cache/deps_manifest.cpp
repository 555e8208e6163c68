#include "cache/deps_manifest.h"

#include "cache/store_layout.h"
#include "support/error.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/JSON.h>

#include <optional>

namespace specjit::cache {

namespace {

constexpr llvm::StringLiteral k_magic = "specjit-deps 1 ";

llvm::Error corrupt(llvm::StringRef what) {
  return make_error(Errc::corrupt, "dependency manifest: {}", what.str());
}

llvm::json::Array set_json(const DependencySet& set) {
  llvm::json::Array array;
  for (const HeaderDependency& header : set)
    array.push_back(llvm::json::Object{{"name", header.name},
                                       {"dir", static_cast<int64_t>(header.include_dir)},
                                       {"digest", header.digest.hex()}});
  return array;
}

llvm::Expected<DependencySet> set_from_json(const llvm::json::Value& value) {
  const llvm::json::Array* array = value.getAsArray();
  if (array == nullptr)
    return corrupt("a set is not an array");
  DependencySet set;
  for (const llvm::json::Value& item : *array) {
    const llvm::json::Object* object = item.getAsObject();
    if (object == nullptr)
      return corrupt("a header is not an object");
    auto name = object->getString("name");
    auto dir = object->getInteger("dir");
    auto digest_text = object->getString("digest");
    std::optional<Digest128> digest =
        digest_text ? Digest128::from_hex(*digest_text) : std::nullopt;
    if (!name || name->empty() || !dir || *dir < 0 || *dir > UINT32_MAX || !digest)
      return corrupt("a header lacks its name, dir or digest");
    set.push_back({name->str(), static_cast<uint32_t>(*dir), *digest});
  }
  return set;
}

// The body exactly as encode_deps_manifest writes it (llvm::json's compact printing, keys
// sorted), read without building a JSON tree: llvm::json::parse copies every element of an
// array each time the array grows, which made it most of a fresh process's header check.
// nullopt for anything else (whitespace, escapes, non-ASCII, another order, a bad value):
// the general parser then decides, so both accept the same files with the same meaning.
class CanonicalScanner {
public:
  explicit CanonicalScanner(llvm::StringRef body) : m_rest(body) {}

  std::optional<std::vector<DependencySet>> sets(const Digest128& definition) {
    std::optional<llvm::StringRef> named;
    if (!literal("{\"definition\":") || !(named = plain_string()) || *named != definition.hex() ||
        !literal(",\"sets\":["))
      return std::nullopt;
    std::vector<DependencySet> result;
    if (literal("]"))
      return end() ? std::optional(std::move(result)) : std::nullopt;
    do {
      std::optional<DependencySet> one = set();
      if (!one)
        return std::nullopt;
      result.push_back(std::move(*one));
    } while (literal(","));
    if (!literal("]") || !end())
      return std::nullopt;
    return result;
  }

private:
  std::optional<DependencySet> set() {
    if (!literal("["))
      return std::nullopt;
    DependencySet result;
    if (literal("]"))
      return result;
    do {
      HeaderDependency header;
      std::optional<Digest128> hashed;
      std::optional<uint32_t> dir;
      std::optional<llvm::StringRef> name;
      if (!literal("{\"digest\":") || !(hashed = digest()) || !literal(",\"dir\":") ||
          !(dir = index()) || !literal(",\"name\":") || !(name = plain_string()) || name->empty() ||
          !literal("}"))
        return std::nullopt;
      result.push_back({name->str(), *dir, *hashed});
    } while (literal(","));
    if (!literal("]"))
      return std::nullopt;
    return result;
  }

  bool literal(llvm::StringRef text) { return m_rest.consume_front(text); }
  bool end() { return literal("}") && m_rest.empty(); }

  std::optional<Digest128> digest() {
    std::optional<llvm::StringRef> text = plain_string();
    return text && text->size() == 32 ? Digest128::from_hex(*text) : std::nullopt;
  }

  // A string without escapes, control characters or non-ASCII bytes.
  std::optional<llvm::StringRef> plain_string() {
    if (!literal("\""))
      return std::nullopt;
    size_t end = m_rest.find_if([](char c) {
      return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20 ||
             static_cast<unsigned char>(c) >= 0x80;
    });
    if (end == llvm::StringRef::npos || m_rest[end] != '"')
      return std::nullopt;
    llvm::StringRef text = m_rest.take_front(end);
    m_rest = m_rest.drop_front(end + 1);
    return text;
  }

  // A directory index as llvm::json prints it: decimal, no sign, no leading zero.
  std::optional<uint32_t> index() {
    size_t digits = 0;
    while (digits < m_rest.size() && digits < 11 && llvm::isDigit(m_rest[digits]))
      ++digits;
    uint64_t value = 0;
    if (digits == 0 || (digits > 1 && m_rest[0] == '0') ||
        m_rest.take_front(digits).getAsInteger(10, value) || value > UINT32_MAX)
      return std::nullopt;
    m_rest = m_rest.drop_front(digits);
    return static_cast<uint32_t>(value);
  }

  llvm::StringRef m_rest;
};

std::string manifest_path(const LayerPaths& layer, const Digest128& definition) {
  return layer.deps() + "/" + definition.hex() + ".json";
}

} // namespace

std::string encode_deps_manifest(const Digest128& definition, llvm::ArrayRef<DependencySet> sets) {
  llvm::json::Array array;
  for (const DependencySet& set : sets)
    array.push_back(set_json(set));
  std::string body;
  llvm::raw_string_ostream os(body);
  os << llvm::json::Value(
      llvm::json::Object{{"definition", definition.hex()}, {"sets", std::move(array)}});
  os.flush();
  return frame_deps_manifest(body);
}

std::string frame_deps_manifest(llvm::StringRef body) {
  return k_magic.str() + hash128(body).hex() + "\n" + body.str();
}

llvm::Expected<std::vector<DependencySet>> decode_deps_manifest(llvm::StringRef bytes,
                                                                const Digest128& definition) {
  if (!bytes.consume_front(k_magic))
    return corrupt("bad magic");
  auto [checksum, body] = bytes.split('\n');
  std::optional<Digest128> expected = Digest128::from_hex(checksum);
  if (!expected || hash128(body) != *expected)
    return corrupt("checksum mismatch");
  if (std::optional<std::vector<DependencySet>> sets = CanonicalScanner(body).sets(definition))
    return std::move(*sets);
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(body);
  if (!value)
    return corrupt(llvm::toString(value.takeError()));
  const llvm::json::Object* root = value->getAsObject();
  const llvm::json::Array* sets = root ? root->getArray("sets") : nullptr;
  if (sets == nullptr || root->getString("definition").getValueOr("") != definition.hex())
    return corrupt("not this definition's manifest");
  std::vector<DependencySet> result;
  for (const llvm::json::Value& set : *sets) {
    llvm::Expected<DependencySet> decoded = set_from_json(set);
    if (!decoded)
      return decoded.takeError();
    result.push_back(std::move(*decoded));
  }
  return result;
}

namespace {

std::vector<DependencySet> read_layer(const LayerPaths& layer, const Digest128& definition) {
  if (!real_deps_directory(layer))
    return {};
  ReadFile file = read_entry_file(manifest_path(layer, definition));
  if (file.status != ReadStatus::ok)
    return {};
  llvm::StringRef bytes(file.bytes->getBufferStart(), file.bytes->getBufferSize());
  llvm::Expected<std::vector<DependencySet>> sets = decode_deps_manifest(bytes, definition);
  if (!sets) {
    llvm::consumeError(sets.takeError()); // a miss; the next compile rewrites the root's
    return {};
  }
  return std::move(*sets);
}

} // namespace

std::vector<DependencySet> read_dependency_sets(const DiskStore& store,
                                                const Digest128& definition) {
  std::vector<DependencySet> sets;
  for (const Layer& layer : readable_layers(store.options(), store.root_readable(), store.refused_layers()))
    for (DependencySet& set : read_layer(layer.paths, definition))
      sets.push_back(std::move(set));
  return sets;
}

llvm::Error publish_dependency_set(DiskStore& store, const Digest128& definition,
                                   const DependencySet& set) {
  if (!store.writable())
    return make_error(Errc::io, "cache root is not writable: {}", store.unusable_reason());
  LayerPaths root(store.options().root);
  std::vector<DependencySet> sets = {set};
  for (DependencySet& older : read_layer(root, definition))
    if (older != set && sets.size() < k_max_dependency_sets)
      sets.push_back(std::move(older));
  return store.publish_root_file("deps", definition.hex() + ".json",
                                 encode_deps_manifest(definition, sets));
}

} // namespace specjit::cache
