// Runs a peer benchmark written in Python (bench/peers/*.py) and reads its results: the scripts
// print `key=value` lines on stdout (value a number) and log to stderr.
//
//   std::string why_not;
//   auto tf = weft::bench::run_python_peer(weft::bench::peer_python("WEFT_BENCH_PYTHON"),
//                                          weft::bench::peer_script("tf_multiworker.py"),
//                                          {"--workers", "2", "--steps", "50"}, 300, &why_not);
//   if (tf) use((*tf)["step_ms"]); else print("n/a: " + why_not);
//
// A peer that cannot run is reported, never fatal: the benchmark prints weft alone with the reason.
// Pass the script a --timeout somewhat below timeout_s, so that a hung run is reported by the
// script itself (which names the stuck worker) before `timeout` has to stop it.
//
// Under mpirun, call this on one rank only, and keep the other ranks from spinning meanwhile (Open
// MPI's blocking calls busy-poll a core, which the peer's workers then lack on a small machine).
// The run is bounded by `timeout` (coreutils), which signals the script's whole process group, and
// the scripts kill their own worker processes on SIGTERM, so nothing is left behind.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace weft::bench {

// bench/ of the source tree, where the peers' scripts live. bench/CMakeLists.txt defines
// WEFT_BENCH_SOURCE_DIR for every benchmark; without it, bench/ relative to the working directory.
inline std::string bench_source_dir() {
#ifdef WEFT_BENCH_SOURCE_DIR
  return WEFT_BENCH_SOURCE_DIR;
#else
  return "bench";
#endif
}

// The path of bench/peers/<name>.
inline std::string peer_script(const std::string& name) { return bench_source_dir() + "/peers/" + name; }

// The interpreter named by environment variable `variable` (scripts/bench sets WEFT_BENCH_PYTHON
// for TensorFlow and WEFT_BENCH_TORCH_PYTHON for PyTorch), or "" when unset.
inline std::string peer_python(const char* variable) {
  const char* value = std::getenv(variable);
  return value ? value : "";
}

namespace peer_runner_detail {

// One shell word: 'text' with every ' written as '\''.
inline std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string trimmed(std::string s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

// The last non-empty line of a file (the script's stderr), for the reason a run failed.
inline std::string last_line_of(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!trimmed(line).empty()) last = trimmed(line);
  return last;
}

// `key=value` with a key of [A-Za-z0-9_] and a value that is a whole number; other lines are
// not results (the scripts print none, but an interpreter's warning must not become one).
inline bool parse_result_line(const std::string& raw, std::string* key, double* value) {
  const std::string line = trimmed(raw);
  const auto eq = line.find('=');
  if (eq == 0 || eq == std::string::npos || eq + 1 == line.size()) return false;
  for (size_t i = 0; i < eq; ++i) {
    const char c = line[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  const std::string text = line.substr(eq + 1);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE) return false;
  *key = line.substr(0, eq);
  *value = v;
  return true;
}

}  // namespace peer_runner_detail

// Runs `python script args...` under `timeout timeout_s` and returns its `key=value` results, or
// nullopt with the reason in *why_not (when not null): no interpreter given, script missing,
// interpreter not found, timed out, the peer unavailable (exit 3: its library is not installed),
// another exit status, or no results printed. The script's stderr is kept out of the benchmark's
// output; its last line goes into the reason.
inline std::optional<std::map<std::string, double>> run_python_peer(const std::string& python,
                                                                    const std::string& script,
                                                                    const std::vector<std::string>& args,
                                                                    int timeout_s, std::string* why_not) {
  namespace d = peer_runner_detail;
  auto fail = [why_not](std::string reason) -> std::optional<std::map<std::string, double>> {
    if (why_not) *why_not = std::move(reason);
    return std::nullopt;
  };
  if (python.empty()) return fail("no Python interpreter given (scripts/bench sets WEFT_BENCH_PYTHON, WEFT_BENCH_TORCH_PYTHON)");
  if (timeout_s <= 0) return fail("timeout must be positive, got " + std::to_string(timeout_s) + " s");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(script, ec)) return fail("peer script " + script + " not found");
  if (python.find('/') != std::string::npos && access(python.c_str(), X_OK) != 0)
    return fail("Python interpreter " + python + " not found or not executable");

  // The script's stderr goes to a file of its own: shown on failure, silent otherwise.
  std::string stderr_path = (std::filesystem::temp_directory_path(ec) / "weft-peer-XXXXXX").string();
  const int fd = mkstemp(stderr_path.data());
  if (fd < 0) return fail("could not create a temporary file for the peer's stderr");
  close(fd);
  struct RemoveOnExit {
    std::string path;
    ~RemoveOnExit() { std::remove(path.c_str()); }
  } remove_stderr{stderr_path};

  // -k: SIGKILL 10 s after the SIGTERM if the script ignores it.
  std::string command = "timeout -k 10 " + std::to_string(timeout_s) + " " + d::shell_quoted(python) + " " +
                        d::shell_quoted(script);
  for (const std::string& a : args) command += " " + d::shell_quoted(a);
  command += " </dev/null 2>" + d::shell_quoted(stderr_path);

  std::fflush(nullptr);  // the child must not inherit unflushed output and print it twice
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return fail("could not start a shell for " + script);
  std::map<std::string, double> results;
  std::array<char, 4096> buf;
  std::string line;
  while (std::fgets(buf.data(), buf.size(), pipe)) {
    line += buf.data();
    if (line.empty() || line.back() != '\n') continue;  // a line longer than the buffer
    std::string key;
    double value = 0;
    if (d::parse_result_line(line, &key, &value)) results[key] = value;
    line.clear();
  }
  if (std::string key; !line.empty()) {
    double value = 0;
    if (d::parse_result_line(line, &key, &value)) results[key] = value;
  }
  const int status = pclose(pipe);

  const std::string said = d::last_line_of(stderr_path);
  const std::string detail = said.empty() ? "" : ": " + said;
  if (status == -1) return fail("could not wait for " + script);
  if (WIFSIGNALED(status)) return fail(script + " killed by signal " + std::to_string(WTERMSIG(status)) + detail);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  // 124: `timeout` stopped it (or the script's own --timeout did); 137: it needed the SIGKILL.
  if (code == 124 || code == 137) return fail(script + " timed out after " + std::to_string(timeout_s) + " s" + detail);
  if (code == 126 || code == 127) return fail("could not run " + python + detail);
  if (code == 3) return fail("peer unavailable" + detail);
  if (code != 0) return fail(script + " exited with status " + std::to_string(code) + detail);
  if (results.empty()) return fail(script + " printed no key=value results" + detail);
  return results;
}

}  // namespace weft::bench
