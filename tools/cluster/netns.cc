#include "tools/cluster/netns.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tools/cluster/signals.h"

namespace estuary::launcher {
namespace {

// Serialises the choice of tag and subnet between launchers started at the
// same moment (each would see the other's subnet still free).
constexpr const char* kLockPath = "/run/lock/estuary-cluster-netns.lock";

// Runs a shell command (names and addresses here are our own: digits,
// letters, dots); its stdout and stderr in `output`.
bool RunCommand(const std::string& command, std::string* output) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  std::string text;
  if (pipe != nullptr) {
    char buffer[512];
    while (::fgets(buffer, sizeof buffer, pipe) != nullptr) text += buffer;
  }
  const int status = pipe != nullptr ? ::pclose(pipe) : -1;
  if (output) *output = text;
  return status == 0;
}

bool Step(const std::string& command, std::string* error) {
  std::string output;
  if (RunCommand(command, &output)) return true;
  while (!output.empty() && output.back() == '\n') output.pop_back();
  if (error) *error = "`" + command + "` failed: " + output;
  return false;
}

// The kernel's identity of a named object now: an interface's index, a
// namespace's inode; 0 when nothing has that name.
unsigned long Identity(const std::string& kind, const std::string& name) {
  if (kind == "netns") {
    struct stat info {};
    return ::stat(("/var/run/netns/" + name).c_str(), &info) == 0 ? static_cast<unsigned long>(info.st_ino) : 0;
  }
  return ::if_nametoindex(name.c_str());
}

// True when `text` ("A.B.C.D" or "A.B.C.D/N") overlaps 10.80.x.0/24.
bool Overlaps(const std::string& text, int x) {
  const auto slash = text.find('/');
  const int length = slash == std::string::npos ? 32 : std::atoi(text.c_str() + slash + 1);
  in_addr address{};
  if (::inet_pton(AF_INET, text.substr(0, slash).c_str(), &address) != 1 || length < 0 || length > 32) return false;
  const int shorter = length < 24 ? length : 24;
  const uint32_t mask = shorter == 0 ? 0 : ~uint32_t(0) << (32 - shorter);
  const uint32_t ours = (10u << 24) | (80u << 16) | (uint32_t(x) << 8);
  return (ntohl(address.s_addr) & mask) == (ours & mask);
}

// A subnet no route of any table and no address of the machine touches
// (the local table lists every address, so routes cover both). Ignores
// the default route, which contains everything.
bool SubnetFree(int x, std::string* error) {
  std::string routes;
  if (!RunCommand("ip -4 route show table all", &routes)) {
    if (error) *error = "`ip -4 route show table all` failed: " + routes;
    return false;
  }
  std::istringstream lines(routes);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string word;
    while (words >> word) {
      if (word == "default") break;
      if (word.find_first_not_of("0123456789./") == std::string::npos && word.find('.') != std::string::npos) {
        if (Overlaps(word, x)) return false;
        break;
      }
    }
  }
  return true;
}

std::string RandomTag() {
  unsigned char random[2] = {0, 0};
  (void)::getrandom(random, sizeof random, 0);
  char tag[8];
  std::snprintf(tag, sizeof tag, "est%02x%02x", random[0], random[1]);
  return tag;
}

// True when no namespace or interface name begins with `tag`.
bool TagUnused(const std::string& tag) {
  std::string namespaces, links;
  RunCommand("ip netns list", &namespaces);
  RunCommand("ip -o link show", &links);
  return namespaces.find(tag) == std::string::npos && links.find(tag) == std::string::npos;
}

struct Entry {
  std::string kind, name;
  unsigned long identity = 0;
};

// Deletes one listed object if it is still the one listed.
bool RemoveEntry(const Entry& entry, std::string* report) {
  const unsigned long now = Identity(entry.kind, entry.name);
  if (now == 0) return true;  // already gone (a veth goes with its namespace)
  if (now != entry.identity) {
    *report += " skipped " + entry.kind + " " + entry.name + " (now another one, not ours);";
    return true;
  }
  const std::string command = entry.kind == "netns" ? "ip netns del " + entry.name : "ip link del " + entry.name;
  std::string error;
  if (!Step(command, &error)) {
    *report += " " + error + ";";
    return false;
  }
  *report += " " + entry.kind + " " + entry.name;
  return true;
}

}  // namespace

std::string HostNetwork::Unavailable() {
  if (::geteuid() != 0) return "--netns needs root (network namespaces, a bridge and veth pairs)";
  std::string output;
  if (!RunCommand("command -v ip", &output)) return "--netns needs the `ip` command (Debian: iproute2)";
  return "";
}

std::unique_ptr<HostNetwork> HostNetwork::Create(const std::string& record_path, const std::vector<NetnsHost>& hosts,
                                                 std::string* error) {
  if (auto why = Unavailable(); !why.empty()) {
    *error = why;
    return nullptr;
  }
  const int lock = ::open(kLockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  std::unique_ptr<HostNetwork> network(new HostNetwork());
  network->record_path_ = record_path;
  const bool built = network->Build(hosts, error);
  if (lock >= 0) ::close(lock);
  if (built) return network;
  std::string report;
  network->Remove(&report);
  return nullptr;
}

bool HostNetwork::Build(const std::vector<NetnsHost>& hosts, std::string* error) {
  for (int attempt = 0; attempt < 16 && tag_.empty(); ++attempt) {
    const std::string tag = RandomTag();
    if (TagUnused(tag)) tag_ = tag;
  }
  int x = 0;
  while (x < 256 && !SubnetFree(x, error)) ++x;
  if (tag_.empty() || x == 256) {
    if (error->empty()) *error = tag_.empty() ? "no unused namespace tag found" : "every 10.80.X.0/24 is in use";
    return false;
  }
  prefix_ = "10.80." + std::to_string(x) + ".";
  bridge_ = tag_ + "br";
  {
    std::ofstream record(record_path_, std::ios::trunc);
    record << "# estuary-cluster --netns: what this run made, removed at stop\npid " << ::getpid() << "\n";
    if (!record) {
      *error = "cannot write " + record_path_;
      return false;
    }
  }
  if (!Step("ip link add " + bridge_ + " type bridge", error) || !Record("bridge", bridge_, error) ||
      !Step("ip addr add " + bridge_address() + "/24 dev " + bridge_, error) ||
      !Step("ip link set " + bridge_ + " up", error)) {
    return false;
  }
  for (const NetnsHost& host : hosts) {
    const std::string ns = Namespace(host.name);
    const std::string veth = tag_ + "v" + host.name;
    if (!Step("ip netns add " + ns, error) || !Record("netns", ns, error) ||
        !Step("ip link add " + veth + " type veth peer name eth0 netns " + ns, error) ||
        !Record("veth", veth, error) || !Step("ip link set " + veth + " master " + bridge_ + " up", error) ||
        !Step("ip -n " + ns + " link set lo up", error) ||
        !Step("ip -n " + ns + " addr add " + Address(host.octet) + "/24 dev eth0", error) ||
        !Step("ip -n " + ns + " link set eth0 up", error)) {
      return false;
    }
  }
  return true;
}

bool HostNetwork::Record(const std::string& kind, const std::string& name, std::string* error) {
  std::ofstream record(record_path_, std::ios::app);
  record << kind << " " << name << " " << Identity(kind, name) << "\n";
  record.flush();
  if (record) return true;
  *error = "cannot append to " + record_path_ + " (" + kind + " " + name + " is not recorded)";
  return false;
}

bool HostNetwork::Remove(std::string* report) {
  if (removed_ || record_path_.empty()) return true;
  removed_ = true;
  return RemoveRecorded(record_path_, report);
}

HostNetwork::~HostNetwork() {
  std::string report;
  Remove(&report);
}

bool HostNetwork::RemoveRecorded(const std::string& record_path, std::string* report) {
  std::ifstream in(record_path);
  if (!in) return true;
  std::vector<Entry> entries;
  pid_t writer = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    Entry entry;
    if (!(words >> entry.kind) || entry.kind[0] == '#') continue;
    if (entry.kind == "pid") {
      words >> writer;
      continue;
    }
    // Only names of the form est<tag>...: a hand-edited list deletes nothing else.
    if (words >> entry.name >> entry.identity && entry.name.rfind("est", 0) == 0) entries.push_back(entry);
  }
  if (writer > 0 && writer != ::getpid() && IsLauncher(writer)) {
    *report = "the launcher that made them (pid " + std::to_string(writer) + ") still runs";
    return false;
  }
  bool removed = true;
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) removed = RemoveEntry(*it, report) && removed;
  if (removed) ::unlink(record_path.c_str());
  return removed;
}

}  // namespace estuary::launcher
