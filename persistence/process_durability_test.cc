// kill -9 of a real process: a child writes keys under SyncPolicy::kAlways
// and reports each acknowledged index on a pipe; the parent SIGKILLs it
// mid-stream, reopens the directory and checks that every acknowledged key
// is there and that what survived is a prefix of the writes. Runs for
// Bitcask on the POSIX file system and for RocksDB. No sleeps: the parent
// waits on the pipe with a deadline.
//
// The child is this test binary re-executed (fork then exec, so it holds no
// state copied from the parent's threads) with ESTUARY_DURABILITY_CHILD set;
// a static initializer below runs the writer and exits before gtest starts.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "io/file_system.h"
#include "persistence/bitcask/bitcask_engine.h"
#include "persistence/rocksdb/rocksdb_engine.h"

extern char** environ;

namespace estuary::persistence {
namespace {

constexpr const char* kChildVariable = "ESTUARY_DURABILITY_CHILD";
constexpr int kMaxWrites = 1'000'000;

std::string Key(int i) {
  std::string out = "k/";
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(i >> shift));
  return out;
}

std::string Value(int i) { return "value-" + std::to_string(i) + std::string(100, 'v'); }

Result<std::unique_ptr<StorageEngine>> OpenEngine(const std::string& engine,
                                                  const std::string& dir) {
  auto quiet = [](const std::string&) {};
  if (engine == "rocksdb") {
    RocksDbOptions options;
    options.sync = SyncPolicy::kAlways;
    options.log = quiet;
    auto opened = RocksDbEngine::Open(dir, options);
    if (!opened) return MakeError(opened.error());
    return std::unique_ptr<StorageEngine>(std::move(*opened));
  }
  bitcask::BitcaskOptions options;
  options.sync = SyncPolicy::kAlways;
  options.max_file_size = 64 << 10;  // cross rotations while killed
  options.log = quiet;
  auto opened = bitcask::BitcaskEngine::Open(io::PosixFileSystem::Instance(), dir, options);
  if (!opened) return MakeError(opened.error());
  return std::unique_ptr<StorageEngine>(std::move(*opened));
}

// The child: "<engine> <dir> <fd>" in the environment. Writes until killed.
[[noreturn]] void RunWriter(const char* spec) {
  std::istringstream in(spec);
  std::string engine_name, dir;
  int fd = -1;
  in >> engine_name >> dir >> fd;
  auto engine = OpenEngine(engine_name, dir);
  if (!engine) {
    std::fprintf(stderr, "writer: open failed: %s\n", engine.error().message.c_str());
    _exit(2);
  }
  for (int i = 0; i < kMaxWrites; ++i) {
    if (auto s = (*engine)->Put(Key(i), Value(i)); !s) _exit(3);
    std::string line = std::to_string(i) + "\n";
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(4);
  }
  _exit(0);
}

[[maybe_unused]] const bool kIsChild = [] {
  if (const char* spec = std::getenv(kChildVariable)) RunWriter(spec);
  return false;
}();

struct KilledWriter {
  int last_acknowledged = -1;
  bool killed_by_sigkill = false;
  std::string error;
};

// Reads complete lines ("<index>\n") from `fd` until index `wanted` is
// seen (or, with until_eof, until EOF), or the deadline; returns the last
// complete index seen, starting from `last`.
int ReadAcks(int fd, std::string& pending, int last, std::chrono::steady_clock::time_point deadline,
             bool until_eof, int wanted) {
  char buffer[4096];
  while (until_eof || last < wanted) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;  // EOF: the child is gone
    pending.append(buffer, static_cast<size_t>(n));
    size_t newline;
    while ((newline = pending.find('\n')) != std::string::npos) {
      last = std::stoi(pending.substr(0, newline));
      pending.erase(0, newline + 1);
    }
  }
  return last;
}

KilledWriter RunAndKill(const std::string& engine, const std::string& dir, int acks_before_kill) {
  KilledWriter result;
  int fds[2];
  if (::pipe(fds) != 0) return {-1, false, "pipe failed"};
  // Everything exec needs is prepared before fork (only exec and _exit after).
  std::string variable =
      std::string(kChildVariable) + "=" + engine + " " + dir + " " + std::to_string(fds[1]);
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  env.push_back(variable.data());
  env.push_back(nullptr);
  char arg0[] = "persistence_test_writer";
  char* argv[] = {arg0, nullptr};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::execve("/proc/self/exe", argv, env.data());
    _exit(127);
  }
  ::close(fds[1]);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::string pending;
  int last = ReadAcks(fds[0], pending, -1, deadline, false, acks_before_kill - 1);
  ::kill(pid, SIGKILL);
  // Acks written before the kill are still in the pipe: drain to EOF.
  result.last_acknowledged = ReadAcks(fds[0], pending, last, deadline, true, 0);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.killed_by_sigkill = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  if (!result.killed_by_sigkill)
    result.error = "writer exited with status " + std::to_string(status);
  return result;
}

class ProcessDurability : public ::testing::TestWithParam<std::string> {
 protected:
  ProcessDurability() {
    char tmpl[] = "/tmp/estuary_kill9_XXXXXX";
    EXPECT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  ~ProcessDurability() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_P(ProcessDurability, EveryAcknowledgedWriteSurvivesKill9UnderAlways) {
  const std::string db = dir_ + "/db";
  KilledWriter writer = RunAndKill(GetParam(), db, 200);
  ASSERT_TRUE(writer.killed_by_sigkill) << writer.error;
  ASSERT_GE(writer.last_acknowledged, 199);

  auto engine = OpenEngine(GetParam(), db);
  ASSERT_TRUE(engine) << engine.error().message;
  int next = 0;
  bool prefix = true;
  ASSERT_TRUE((*engine)->Scan("k/", [&](std::string_view key, std::string_view value) {
    prefix = key == Key(next) && value == Value(next);
    ++next;
    return prefix;
  }));
  EXPECT_TRUE(prefix) << "key " << next - 1 << " is missing or wrong";
  EXPECT_GT(next, writer.last_acknowledged) << "acknowledged writes lost";
  std::printf("%s: %d acknowledged before kill -9, %d recovered\n", GetParam().c_str(),
              writer.last_acknowledged + 1, next);
}

INSTANTIATE_TEST_SUITE_P(Engines, ProcessDurability, ::testing::Values("bitcask", "rocksdb"));

}  // namespace
}  // namespace estuary::persistence
