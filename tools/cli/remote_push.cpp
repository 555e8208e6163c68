#include "remote_push.h"

#include "runtime/remote_tier.h"

#include "cache/remote_value.h"
#include "support/error.h"

#include <llvm/Support/MemoryBuffer.h>

#include <set>

namespace specjit::cli {

llvm::Expected<std::unique_ptr<cache::RemoteStore>> writable_remote(const Context& context) {
  if (context.config.remote.value && context.config.remote.value->read_only())
    return make_error(Errc::invalid_argument,
                      "the remote is read-only (mode=ro in SPECJIT_REMOTE): nothing is pushed");
  return runtime::open_remote_store(context.config);
}

PushResult push_local_entries(Context& context, cache::RemoteStore& remote) {
  PushResult result;
  cache::DiskStore store(store_options(context.config));
  std::set<std::string> seen; // a key in the root shadows the same key in a base layer
  for (const cache::ListedEntry& listed : store.list()) {
    if (!listed.key || !seen.insert(listed.key->hex()).second)
      continue;
    cache::LookupResult found = store.lookup(*listed.key, listed.kernel);
    if (!found.hit) {
      ++result.skipped;
      continue;
    }
    std::string value = cache::remote_value_encode(found.hit->bytes->getBuffer(), *listed.key,
                                                    {store.trust_key_configured(), store.trust_key()});
    auto stored = remote.set(cache::remote_entry_name(*listed.key), value,
                             /*only_if_absent=*/true);
    if (!stored) {
      if (result.first_failure.empty())
        result.first_failure = llvm::toString(stored.takeError());
      else
        llvm::consumeError(stored.takeError());
      ++result.failed;
      if (remote.backing_off())
        break; // the server is gone: every further entry would fail the same way
      continue;
    }
    ++(*stored ? result.pushed : result.present);
  }
  return result;
}

llvm::json::Object to_json(const PushResult& result) {
  llvm::json::Object object{{"pushed", result.pushed},
                            {"present", result.present},
                            {"skipped", result.skipped},
                            {"failed", result.failed}};
  if (!result.first_failure.empty())
    object["error"] = result.first_failure;
  return object;
}

} // namespace specjit::cli
