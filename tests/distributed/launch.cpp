// Starts one process per rank and waits for all of them, so a test of several processes is one ctest
// command: lmfuse_launch --ranks R [--timeout S] [--stdout PREFIX] -- COMMAND ARGS...
// Rank r runs COMMAND ARGS... --rank r --world-size R --store DIR/store, where DIR is a fresh folder
// (removed afterwards; the FileStore needs a file no earlier run has used). With --stdout, rank r's
// standard output goes to PREFIX.r. Exits 0 when every rank exits 0; after S seconds (default 120) every
// rank still running is killed and the launch fails, so a collective that never completes fails the test
// instead of hanging it. Once a rank has failed, the others are given kFailureGraceSeconds to fail too
// (a bad argument is reported by every rank), then killed: they would wait for it in a collective.
// No LibTorch here: ranks are exec'd, never forked from a process with threads.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kFailureGraceSeconds = 10;

struct Launch {
  int ranks = 0;
  int timeoutSeconds = 120;
  std::string stdoutPrefix;
  std::vector<std::string> command;
};

bool parse(int argc, char** argv, Launch& launch) {
  int i = 1;
  for (; i < argc && std::string(argv[i]) != "--"; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) return false;
    if (arg == "--ranks") launch.ranks = std::atoi(argv[++i]);
    else if (arg == "--timeout") launch.timeoutSeconds = std::atoi(argv[++i]);
    else if (arg == "--stdout") launch.stdoutPrefix = argv[++i];
    else return false;
  }
  for (++i; i < argc; ++i) launch.command.push_back(argv[i]);
  return launch.ranks >= 1 && launch.timeoutSeconds > 0 && !launch.command.empty();
}

pid_t start(const Launch& launch, int rank, const std::string& store) {
  std::vector<std::string> args = launch.command;
  for (std::string extra : {std::string("--rank"), std::to_string(rank), std::string("--world-size"),
                            std::to_string(launch.ranks), std::string("--store"), store})
    args.push_back(extra);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const std::string out = launch.stdoutPrefix.empty() ? "" : launch.stdoutPrefix + "." + std::to_string(rank);
  pid_t pid = fork();
  if (pid == 0) {
    if (!out.empty()) {
      int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) _exit(126);
      close(fd);
    }
    execv(argv[0], argv.data());
    std::perror("lmfuse_launch: execv");
    _exit(127);
  }
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  Launch launch;
  if (!parse(argc, argv, launch)) {
    std::fprintf(stderr, "usage: lmfuse_launch --ranks R [--timeout S] [--stdout PREFIX] -- COMMAND ARGS...\n");
    return 2;
  }
  char folder[] = "/tmp/lmfuse-launch-XXXXXX";
  if (!mkdtemp(folder)) {
    std::perror("lmfuse_launch: mkdtemp");
    return 2;
  }
  const std::string store = std::string(folder) + "/store";
  std::vector<pid_t> pids;
  for (int rank = 0; rank < launch.ranks; ++rank) pids.push_back(start(launch, rank, store));

  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(launch.timeoutSeconds);
  std::vector<int> status(pids.size(), -1);
  int running = static_cast<int>(pids.size());
  bool timedOut = false, stoppedAfterFailure = false, killedAfterFailure = false;
  while (running > 0) {
    for (std::size_t rank = 0; rank < pids.size(); ++rank) {
      int code = 0;
      if (status[rank] == -1 && waitpid(pids[rank], &code, WNOHANG) == pids[rank]) {
        status[rank] = WIFEXITED(code) ? WEXITSTATUS(code) : 128 + WTERMSIG(code);
        --running;
        if (status[rank] != 0 && !stoppedAfterFailure) {
          const auto graceEnd = std::chrono::steady_clock::now() + std::chrono::seconds(kFailureGraceSeconds);
          if (graceEnd < deadline) deadline = graceEnd, stoppedAfterFailure = true;
        }
      }
    }
    if (running > 0 && std::chrono::steady_clock::now() > deadline) {
      timedOut = !stoppedAfterFailure;
      killedAfterFailure = stoppedAfterFailure;
      for (std::size_t rank = 0; rank < pids.size(); ++rank)
        if (status[rank] == -1) {
          kill(pids[rank], SIGKILL);
          waitpid(pids[rank], nullptr, 0);
          status[rank] = 128 + SIGKILL;
          --running;
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::error_code ignored;
  std::filesystem::remove_all(folder, ignored);

  int failures = 0;
  for (std::size_t rank = 0; rank < pids.size(); ++rank)
    if (status[rank] != 0) {
      ++failures;
      std::fprintf(stderr, "lmfuse_launch: rank %zu exited with %d\n", rank, status[rank]);
    }
  if (timedOut) std::fprintf(stderr, "lmfuse_launch: killed after %d s\n", launch.timeoutSeconds);
  if (killedAfterFailure)
    std::fprintf(stderr, "lmfuse_launch: a rank failed; the ranks still running %d s later were killed\n",
                 kFailureGraceSeconds);
  return failures == 0 ? 0 : 1;
}
