// A second user for the trust tests (RELIABILITY.md, promises 6 and 7): CI runs as root, so the
// tests create an unprivileged user when it is missing and plant files and links as that user
// from a forked child (setgid + setuid), exactly as another account on the host would.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <grp.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

namespace specjit::reliability {

struct OtherUser {
  uid_t uid = 0;
  gid_t gid = 0;
};

inline constexpr const char* k_other_user_name = "specjit-other";

// The second user, created with useradd when missing; nullopt (after a visible SKIPPED line
// naming `test_id`) when this process is not root or the user cannot be made.
inline std::optional<OtherUser> other_user(const char* test_id) {
  if (::geteuid() != 0) {
    std::printf("[reliability] SKIPPED %s: needs root to create and become a second user\n",
                test_id);
    return std::nullopt;
  }
  if (::getpwnam(k_other_user_name) == nullptr) {
    std::string command = std::string("useradd --system --no-create-home --shell /usr/sbin/"
                                      "nologin ") + k_other_user_name + " >/dev/null 2>&1";
    (void)std::system(command.c_str());
  }
  const struct passwd* entry = ::getpwnam(k_other_user_name);
  if (entry == nullptr) {
    std::printf("[reliability] SKIPPED %s: useradd %s failed\n", test_id, k_other_user_name);
    return std::nullopt;
  }
  return OtherUser{entry->pw_uid, entry->pw_gid};
}

// Runs `body` in a forked child as `user`; returns its exit code (-1 when it died).
inline int as_user(const OtherUser& user, const std::function<int()>& body) {
  std::fflush(stdout);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(user.gid) != 0 || ::setuid(user.uid) != 0)
      ::_exit(99);
    ::_exit(body());
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
    return -1;
  return WEXITSTATUS(status);
}

} // namespace specjit::reliability
