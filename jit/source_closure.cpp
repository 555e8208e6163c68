#include "jit/source_closure.h"

#include "support/error.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringMap.h>

namespace specjit::jit {
namespace {

// Removes // and /* */ comments, keeping line structure, so that a commented-out include is
// not seen. String literals are not tracked: "//" inside a string on an #include line cannot
// occur in the include's own name, which is all we read.
std::string strip_comments(llvm::StringRef text) {
  std::string out;
  out.reserve(text.size());
  bool in_block = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (in_block) {
      if (c == '*' && next == '/') {
        in_block = false;
        ++i;
        out += ' ';
      } else if (c == '\n') {
        out += '\n';
      }
      continue;
    }
    if (c == '/' && next == '*') {
      in_block = true;
      ++i;
    } else if (c == '/' && next == '/') {
      while (i < text.size() && text[i] != '\n')
        ++i;
      if (i < text.size())
        out += '\n';
    } else {
      out += c;
    }
  }
  return out;
}

// "a/./b/../c.cuh" -> "a/c.cuh"; nullopt when the name climbs above the root or is absolute.
std::optional<std::string> normalize(llvm::StringRef name) {
  if (name.empty() || name.startswith("/"))
    return std::nullopt;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  llvm::SmallVector<llvm::StringRef, 8> kept;
  name.split(parts, '/', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef part : parts) {
    if (part == ".")
      continue;
    if (part == "..") {
      if (kept.empty())
        return std::nullopt;
      kept.pop_back();
      continue;
    }
    kept.push_back(part);
  }
  if (kept.empty())
    return std::nullopt;
  return llvm::join(kept, "/");
}

llvm::StringRef folder_of(llvm::StringRef name) {
  size_t slash = name.rfind('/');
  return slash == llvm::StringRef::npos ? llvm::StringRef() : name.take_front(slash);
}

std::optional<EmbeddedFile> resolve(llvm::StringRef includer, llvm::StringRef spelled,
                                    SourceLookup lookup) {
  if (std::optional<std::string> name = normalize(spelled))
    if (std::optional<EmbeddedFile> file = lookup(*name))
      return file;
  llvm::StringRef folder = folder_of(includer);
  if (folder.empty())
    return std::nullopt;
  if (std::optional<std::string> name = normalize((folder + "/" + spelled).str()))
    return lookup(*name);
  return std::nullopt;
}

class ClosureBuilder {
public:
  explicit ClosureBuilder(SourceLookup lookup) : m_lookup(lookup) {}

  llvm::Error visit(const EmbeddedFile& file) {
    m_index.try_emplace(file.name, m_files.size());
    m_files.push_back({file, {}});
    for (const std::string& spelled : scan_includes(file.text)) {
      std::optional<EmbeddedFile> header = resolve(file.name, spelled, m_lookup);
      if (!header)
        return make_error(Errc::not_found,
                          "{}: included file \"{}\" is not an embedded kernel source",
                          file.name.str(), spelled);
      if (llvm::Error error = note_spelling(file.name, spelled, header->name))
        return error;
      if (m_index.count(header->name))
        continue;
      if (llvm::Error error = visit(*header))
        return error;
    }
    return llvm::Error::success();
  }

  // Aliases are attached once every file is known: an alias that is itself the name of another
  // file of the program would shadow that file inside NVRTC.
  llvm::Expected<std::vector<ClosureFile>> finish() {
    for (auto& [spelled, resolved] : m_aliases) {
      if (m_index.count(spelled))
        return make_error(Errc::invalid_argument,
                          "#include \"{}\" resolves to {}, but {} is also part of the program; "
                          "spell the include from the kernels_src root",
                          spelled, resolved, spelled);
      m_files[m_index.lookup(resolved)].aliases.push_back(spelled);
    }
    return std::move(m_files);
  }

private:
  llvm::Error note_spelling(llvm::StringRef includer, llvm::StringRef spelled,
                            llvm::StringRef resolved) {
    auto [it, inserted] = m_spellings.try_emplace(spelled, resolved.str());
    if (!inserted && it->second != resolved)
      return make_error(Errc::invalid_argument,
                        "{}: #include \"{}\" means {} here but {} elsewhere in the same "
                        "program; spell the include from the kernels_src root",
                        includer.str(), spelled.str(), resolved.str(), it->second);
    if (inserted && spelled != resolved)
      m_aliases.push_back({spelled.str(), resolved.str()});
    return llvm::Error::success();
  }

  SourceLookup m_lookup;
  std::vector<ClosureFile> m_files;
  llvm::StringMap<size_t> m_index;          // canonical name -> position in m_files
  llvm::StringMap<std::string> m_spellings; // spelled include -> canonical name
  std::vector<std::pair<std::string, std::string>> m_aliases; // (spelled, canonical), in order
};

} // namespace

std::vector<std::string> scan_includes(llvm::StringRef text) {
  std::vector<std::string> names;
  std::string code = strip_comments(text);
  llvm::SmallVector<llvm::StringRef, 64> lines;
  llvm::StringRef(code).split(lines, '\n');
  for (llvm::StringRef line : lines) {
    line = line.ltrim();
    if (!line.consume_front("#"))
      continue;
    line = line.ltrim();
    if (!line.consume_front("include"))
      continue;
    line = line.ltrim();
    if (!line.consume_front("\""))
      continue; // <...> or a macro: not ours to resolve
    size_t end = line.find('"');
    if (end == llvm::StringRef::npos || end == 0)
      continue;
    names.push_back(line.take_front(end).str());
  }
  return names;
}

llvm::Expected<std::vector<ClosureFile>> closure_of(llvm::StringRef name, SourceLookup lookup) {
  std::optional<EmbeddedFile> source;
  if (std::optional<std::string> normalized = normalize(name))
    source = lookup(*normalized);
  if (!source)
    return make_error(Errc::not_found, "kernel source \"{}\" is not embedded", name.str());
  ClosureBuilder builder(lookup);
  if (llvm::Error error = builder.visit(*source))
    return error;
  return builder.finish();
}

Digest128 closure_digest(llvm::ArrayRef<EmbeddedFile> files) {
  FieldHasher hasher;
  hasher.add("closure.files", static_cast<int64_t>(files.size()));
  for (const EmbeddedFile& file : files) {
    hasher.add("closure.name", file.name);
    hasher.add("closure.text", file.text);
  }
  return hasher.finish();
}

} // namespace specjit::jit
