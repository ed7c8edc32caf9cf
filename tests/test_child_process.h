// Tests that need a fresh process run their own test binary again as a child, filtered to one
// child test, and wait for it within a bound (a hung child is killed, never waited on forever).
//
//   const pid_t pid = spawn_test_child("Suite.ChildTest", {"WEFT_X=1", "WEFT_Y"});  // set X, unset Y
//   EXPECT_EQ(wait_test_child(pid, std::chrono::seconds(60)), "");                 // "" = exit 0
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace weft::testing {

// Runs this test binary again, filtered to `test`, with the parent's environment but for
// `changes`: "NAME=value" sets NAME, a bare "NAME" removes it. Returns the child's pid, or -1.
inline pid_t spawn_test_child(const std::string& test, const std::vector<std::string>& changes) {
  auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  auto changed = [&](const char* entry) {
    for (const std::string& c : changes)
      if (name_of(entry) == name_of(c)) return true;
    return false;
  };
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e)
    if (!changed(*e)) envp.push_back(*e);
  for (const std::string& c : changes)
    if (c.find('=') != std::string::npos) envp.push_back(const_cast<char*>(c.c_str()));
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=" + test;
  char* argv[] = {exe.data(), filter.data(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()) != 0) return -1;
  return pid;
}

// "" when the child exited with status 0 within `limit`; otherwise what happened (it is killed
// when the limit passes).
inline std::string wait_test_child(pid_t pid, std::chrono::seconds limit) {
  if (pid < 0) return "it could not be started";
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return "still running after " + std::to_string(limit.count()) + " s; killed";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? "" : "exit status " + std::to_string(WEXITSTATUS(status));
  return "killed by signal " + std::to_string(WTERMSIG(status));
}

}  // namespace weft::testing
