// specjit remote ping|stats|ls|verify|push|pull: the fleet tier's Redis (docs/fleet.md).
// Every command reaches the server once with the configured timeouts: an unreachable server is
// one clear error and exit 1, never a hang.
#include "remote_push.h"

#include "runtime/remote_tier.h"

#include "cache/remote_value.h"
#include "support/error.h"

#include <llvm/Support/MemoryBuffer.h>

#include <fmt/format.h>

namespace specjit::cli {
namespace {

constexpr size_t k_default_limit = 100000;

llvm::Expected<size_t> limit_of(const Context& context) {
  size_t limit = k_default_limit;
  if (auto text = context.args.value("--limit"))
    if (llvm::StringRef(*text).getAsInteger(10, limit) || limit == 0)
      return make_error(Errc::invalid_argument, "--limit needs a positive number, not '{}'",
                        *text);
  return limit;
}

// One remote value, verified under the key its name gives.
struct Checked {
  std::string name;
  std::optional<Digest128> key;
  uint64_t bytes = 0;
  std::optional<std::string> fault; // why it does not verify
  std::optional<cache::EntryMetadata> metadata;
  std::string entry; // the entry file's bytes when it verifies
};

llvm::Expected<std::vector<Checked>> check_all(const Context& context, cache::RemoteStore& remote) {
  auto limit = limit_of(context);
  if (!limit)
    return limit.takeError();
  // With a trust key configured, a value without a valid tag counts as bad (never pulled).
  const std::string& key_file = context.config.trust_key_file.value;
  std::optional<cache::TrustKey> trust_key;
  if (!key_file.empty()) {
    auto loaded = cache::load_trust_key(key_file);
    if (!loaded)
      return loaded.takeError();
    trust_key = *loaded;
  }
  cache::RemoteTrust trust{!key_file.empty(), trust_key ? &*trust_key : nullptr};
  auto names = remote.scan(cache::remote_entry_pattern(), *limit);
  if (!names)
    return names.takeError();
  std::vector<Checked> out;
  for (std::string& name : *names) {
    Checked checked;
    checked.name = std::move(name);
    checked.key = cache::key_of_remote_name(checked.name);
    auto value = remote.get(checked.name, remote.url().max_value_bytes);
    if (!value)
      return value.takeError();
    if (!*value) // evicted or removed since the scan
      continue;
    checked.bytes = (*value)->size();
    auto entry = checked.key ? cache::remote_value_decode(**value, *checked.key,
                                                          remote.url().max_value_bytes, trust)
                             : llvm::Expected<llvm::StringRef>(make_error(
                                   Errc::corrupt, "the name holds no key"));
    if (!entry) {
      checked.fault = llvm::toString(entry.takeError());
    } else {
      checked.entry = entry->str();
      auto decoded = cache::decode_entry(checked.entry, checked.key);
      if (decoded)
        checked.metadata = std::move(decoded->metadata);
      else
        checked.fault = llvm::toString(decoded.takeError());
    }
    out.push_back(std::move(checked));
  }
  return out;
}

llvm::Expected<std::unique_ptr<cache::RemoteStore>> any_remote(const Context& context) {
  return runtime::open_remote_store(context.config);
}

int run_ping(Context& context, cache::RemoteStore& remote) {
  auto ms = remote.ping();
  if (!ms)
    return report_error(context, ms.takeError());
  if (context.json)
    print_json(llvm::json::Object{{"remote", remote.url().redacted()}, {"ms", *ms}});
  else
    fmt::print("{} answered in {:.3f} ms\n", remote.url().redacted(), *ms);
  return k_exit_ok;
}

// "name:value" from INFO's text.
std::string info_field(llvm::StringRef info, llvm::StringRef name) {
  llvm::SmallVector<llvm::StringRef, 64> lines;
  info.split(lines, '\n');
  for (llvm::StringRef line : lines)
    if (line.consume_front(name) && line.consume_front(":"))
      return line.rtrim("\r").str();
  return "";
}

int run_stats(Context& context, cache::RemoteStore& remote) {
  auto info = remote.info();
  if (!info)
    return report_error(context, info.takeError());
  auto names = remote.scan(cache::remote_entry_pattern(), SIZE_MAX);
  if (!names)
    return report_error(context, names.takeError());
  llvm::json::Object stats{{"remote", remote.url().redacted()},
                           {"entries", static_cast<int64_t>(names->size())}};
  for (llvm::StringRef field : {"redis_version", "used_memory", "maxmemory", "maxmemory_policy",
                                "evicted_keys", "keyspace_hits", "keyspace_misses"})
    stats[field] = info_field(*info, field);
  if (context.json) {
    print_json(std::move(stats));
    return k_exit_ok;
  }
  fmt::print("remote: {}\n", remote.url().redacted());
  for (llvm::StringRef field : {"entries", "redis_version", "used_memory", "maxmemory",
                                "maxmemory_policy", "evicted_keys", "keyspace_hits",
                                "keyspace_misses"}) {
    const llvm::json::Value* value = stats.get(field);
    std::string text;
    if (auto s = value->getAsString())
      text = s->str();
    else
      text = std::to_string(*value->getAsInteger());
    fmt::print("{}: {}\n", field.str(), text);
  }
  return k_exit_ok;
}

int run_ls(Context& context, cache::RemoteStore& remote) {
  auto all = check_all(context, remote);
  if (!all)
    return report_error(context, all.takeError());
  llvm::json::Array rows;
  for (const Checked& c : *all) {
    std::string kernel = c.metadata ? c.metadata->key_inputs.kernel : "";
    std::string variant = c.metadata ? variant_text(c.metadata->variant) : "";
    if (context.json)
      rows.push_back(llvm::json::Object{{"key", c.key ? c.key->hex() : ""},
                                        {"kernel", kernel},
                                        {"variant", variant},
                                        {"bytes", static_cast<int64_t>(c.bytes)},
                                        {"ok", !c.fault}});
    else
      fmt::print("{}  {:<24} {:<28} {:>10}{}\n", c.key ? c.key->hex() : c.name, kernel, variant,
                 format_bytes(c.bytes), c.fault ? "  BAD" : "");
  }
  if (context.json)
    print_json(llvm::json::Object{{"entries", std::move(rows)}});
  return k_exit_ok;
}

int run_verify(Context& context, cache::RemoteStore& remote) {
  auto all = check_all(context, remote);
  if (!all)
    return report_error(context, all.takeError());
  bool repair = context.args.has("--repair");
  if (repair && remote.url().read_only())
    return report_error(context, "the remote is read-only (mode=ro): nothing can be removed");
  llvm::json::Array bad;
  int64_t removed = 0;
  for (const Checked& c : *all) {
    if (!c.fault)
      continue;
    bool gone = false;
    if (repair) {
      auto deleted = remote.remove(c.name);
      gone = deleted && *deleted;
      if (!deleted)
        llvm::consumeError(deleted.takeError());
      removed += gone;
    }
    bad.push_back(llvm::json::Object{{"name", c.name}, {"detail", *c.fault}, {"removed", gone}});
    if (!context.json)
      fmt::print("bad: {}: {}{}\n", c.name, *c.fault, gone ? " (removed)" : "");
  }
  int64_t count = static_cast<int64_t>(all->size()), bad_count = static_cast<int64_t>(bad.size());
  if (context.json)
    print_json(llvm::json::Object{
        {"checked", count}, {"bad", std::move(bad)}, {"removed", removed}});
  else
    fmt::print("checked {} remote entries: {} bad{}\n", count, bad_count,
               repair ? fmt::format(", {} removed", removed) : "");
  return bad_count == 0 ? k_exit_ok : k_exit_problems;
}

int run_push(Context& context, cache::RemoteStore&) {
  auto remote = writable_remote(context);
  if (!remote)
    return report_error(context, remote.takeError());
  PushResult result = push_local_entries(context, **remote);
  if (context.json)
    print_json(to_json(result));
  else
    fmt::print("pushed {} entries, {} already there, {} local entries skipped, {} failed{}\n",
               result.pushed, result.present, result.skipped, result.failed,
               result.failed ? " (" + result.first_failure + ")" : "");
  return result.failed == 0 && result.skipped == 0 ? k_exit_ok : k_exit_problems;
}

int run_pull(Context& context, cache::RemoteStore& remote) {
  auto all = check_all(context, remote);
  if (!all)
    return report_error(context, all.takeError());
  cache::DiskStore store(store_options(context.config));
  if (!store.writable())
    return report_error(context, "the cache root cannot be written: " + store.unusable_reason());
  int64_t pulled = 0, present = 0, bad = 0, failed = 0;
  for (const Checked& c : *all) {
    if (c.fault || !c.key || !c.metadata) {
      ++bad;
      continue;
    }
    const std::string& kernel = c.metadata->key_inputs.kernel;
    if (store.lookup(*c.key, kernel).hit) {
      ++present;
      continue;
    }
    if (auto err = store.publish(*c.key, kernel, c.entry)) {
      warn(context, llvm::toString(std::move(err)));
      ++failed;
      continue;
    }
    ++pulled;
  }
  if (context.json)
    print_json(llvm::json::Object{
        {"pulled", pulled}, {"present", present}, {"bad", bad}, {"failed", failed}});
  else
    fmt::print("pulled {} entries, {} already local, {} bad remote entries, {} failed\n", pulled,
               present, bad, failed);
  return bad == 0 && failed == 0 ? k_exit_ok : k_exit_problems;
}

int run_remote(Context& context) {
  const std::string& action = context.args.positional.front();
  using Action = int (*)(Context&, cache::RemoteStore&);
  const std::pair<llvm::StringRef, Action> actions[] = {
      {"ping", run_ping}, {"stats", run_stats}, {"ls", run_ls},
      {"verify", run_verify}, {"push", run_push}, {"pull", run_pull}};
  for (const auto& [name, run] : actions) {
    if (name != action)
      continue;
    auto remote = any_remote(context);
    if (!remote)
      return report_error(context, remote.takeError(), k_exit_usage);
    return run(context, **remote);
  }
  return usage_error(context, fmt::format("unknown action '{}'; expected ping, stats, ls, "
                                          "verify, push or pull", action));
}

} // namespace

std::vector<Command> remote_commands() {
  return {{"remote",
           "the fleet tier: ping, stats, ls, verify [--repair], push, pull (SPECJIT_REMOTE)",
           "remote ping|stats|ls|verify|push|pull [--repair] [--limit N] [--json]",
           "  ping                answer time of the configured server\n"
           "  stats               entries, memory, evictions, hits and misses\n"
           "  ls                  every entry: key, kernel, variant, size\n"
           "  verify [--repair]   verify every value; --repair removes bad ones\n"
           "  push                store every local entry the remote lacks\n"
           "  pull                fetch every verified remote entry the root lacks\n"
           "  --limit N           look at most N remote entries (default 100000)\n",
           "SPECJIT_REMOTE=redis://cache.internal:6379/0 specjit remote verify --json",
           {{"--repair", false, false}, {"--limit", true, false}},
           1,
           1,
           run_remote}};
}

} // namespace specjit::cli
