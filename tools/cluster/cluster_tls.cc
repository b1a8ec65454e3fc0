#include "tools/cluster/cluster_tls.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace estuary::launcher {
namespace {

// Runs argv with stdout and stderr appended to `log`; true on exit status 0.
bool Run(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool RunOrSay(const std::vector<std::string>& argv, const std::string& log, std::string* error) {
  if (Run(argv, log)) return true;
  std::string line;
  for (const auto& arg : argv) line += (line.empty() ? "" : " ") + arg;
  *error = "`" + line + "` failed; see " + log;
  return false;
}

}  // namespace

std::string FindOpenssl() {
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      const std::string candidate = dir + "/openssl";
      if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return ::access("/usr/bin/openssl", X_OK) == 0 ? "/usr/bin/openssl" : "";
}

NodeCertificate NodeCertificateIn(const std::string& folder, int node) {
  const std::string name = folder + "/node-" + std::to_string(node);
  return {name + ".pem", name + ".key"};
}

// The same commands as scripts/start.sh's client-listener CA, so either
// may make the CA first and the other reuses it.
bool MakeClusterCertificates(const std::string& openssl, const std::string& folder, int nodes, std::string* error,
                             const std::vector<std::string>& addresses) {
  std::error_code code;
  std::filesystem::create_directories(folder, code);
  if (code) {
    *error = "cannot create " + folder + ": " + code.message();
    return false;
  }
  const std::string log = folder + "/openssl.log";
  const std::string ca = folder + "/ca.pem", ca_key = folder + "/ca.key";
  if (::access(ca.c_str(), R_OK) != 0 || ::access(ca_key.c_str(), R_OK) != 0) {
    if (!RunOrSay({openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                   "-keyout", ca_key, "-out", ca, "-days", "3650", "-subj", "/CN=Estuary throwaway CA", "-addext",
                   "basicConstraints=critical,CA:TRUE"},
                  log, error)) {
      return false;
    }
    ::chmod(ca_key.c_str(), 0600);
  }
  const std::string extensions = folder + "/node.ext";
  std::string names = "IP:127.0.0.1,DNS:localhost";
  for (const auto& address : addresses) names += ",IP:" + address;
  std::ofstream(extensions) << "subjectAltName=" << names << "\n"
                            << "extendedKeyUsage=serverAuth,clientAuth\n";
  for (int node = 1; node <= nodes; ++node) {
    const NodeCertificate files = NodeCertificateIn(folder, node);
    const std::string request = folder + "/node-" + std::to_string(node) + ".csr";
    if (!RunOrSay({openssl, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                   files.key, "-out", request, "-subj", "/CN=estuary-node-" + std::to_string(node)},
                  log, error) ||
        !RunOrSay({openssl, "x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-days",
                   "825", "-out", files.cert, "-extfile", extensions},
                  log, error)) {
      return false;
    }
    ::chmod(files.key.c_str(), 0600);
    ::unlink(request.c_str());
  }
  return true;
}

}  // namespace estuary::launcher
