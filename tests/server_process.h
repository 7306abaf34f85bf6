// A tgraph-server process for end-to-end tests: started on ephemeral ports with a
// registry made by the test, stopped (or killed) when the test is done. The binary is
// TGRAPH_SERVER_BIN (tests/CMakeLists.txt).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"

namespace tgraph {

struct ServerProcess {
  pid_t pid = -1;
  int port = 0, metrics_port = 0;
  std::string log;

  // file_size_limit > 0: the server runs under RLIMIT_FSIZE (with SIGXFSZ ignored), so
  // that its writes past the limit fail as on a full disk.
  // wait_for_port false: return as soon as the process is started.
  ServerProcess(const std::string& registry, const std::string& dir, std::vector<std::string> extra = {},
                rlim_t file_size_limit = 0, bool wait_for_port = true) {
    const std::string port_file = dir + "/port";
    log = dir + "/server.log";
    std::filesystem::remove(port_file);
    std::vector<std::string> args = {TGRAPH_SERVER_BIN, "--registry", registry, "--address", "127.0.0.1:0",
                                     "--metrics_address", "127.0.0.1:0", "--port_file", port_file,
                                     "--poll_interval_s", "0.2", "--intra_op_threads", "1",
                                     // fp32 unless a test asks otherwise: these tests compare the
                                     // server's scores with the evaluator's fp32 path to 1e-5.
                                     "--precision", "fp32"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid = fork();
    if (pid == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 2);
      dup2(fd, 1);
      if (file_size_limit > 0) {
        signal(SIGXFSZ, SIG_IGN);
        rlimit lim{file_size_limit, file_size_limit};
        setrlimit(RLIMIT_FSIZE, &lim);
      }
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (!wait_for_port) return;
    for (int i = 0; i < 600 && !std::filesystem::exists(port_file); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream(port_file) >> port >> metrics_port;
  }
  // SIGTERM, then the exit status (-1 if it did not exit normally).
  int Stop() {
    if (pid <= 0) return -1;
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // For a server expected to refuse to start: its exit status once it exits within
  // `seconds`, else -1 (it is still running, and the destructor kills it).
  int ExitStatus(int seconds = 30) {
    for (int i = 0; i < seconds * 20 && pid > 0; ++i) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }
  ~ServerProcess() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  // Options for a client of this server.
  ClientOptions Client() const {
    ClientOptions co;
    co.target = "127.0.0.1:" + std::to_string(port);
    return co;
  }
  std::string Log() const {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

}  // namespace tgraph
