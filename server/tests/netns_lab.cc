#include "server/tests/netns_lab.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>

namespace estuary::server::testing {
namespace {

bool Succeeds(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

}  // namespace

std::string NetnsLab::Unavailable() {
  if (::geteuid() != 0) return "not root: network namespaces need root";
  if (!Succeeds("command -v ip")) return "no `ip` (Debian iproute2)";
  if (!Succeeds("command -v nft")) return "no `nft` (Debian nftables; scripts/install-deps.sh installs it)";
  return "";
}

bool NetnsLab::Run(const std::string& command, std::string* error) {
  const std::string quiet = command + " 2>&1";
  FILE* pipe = ::popen(quiet.c_str(), "r");
  std::string output;
  if (pipe != nullptr) {
    char buffer[256];
    while (::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  }
  const int status = pipe != nullptr ? ::pclose(pipe) : -1;
  if (status == 0) return true;
  if (error) *error = "`" + command + "` failed: " + output;
  return false;
}

std::unique_ptr<NetnsLab> NetnsLab::Build(int hosts, std::string* error) {
  if (auto why = Unavailable(); !why.empty()) {
    if (error) *error = why;
    return nullptr;
  }
  std::unique_ptr<NetnsLab> lab(new NetnsLab());
  lab->tag_ = "ep" + std::to_string(::getpid() % 100000);
  lab->hosts_ = hosts;
  const std::string lan = lab->Namespace("lan");
  auto step = [&](const std::string& command) { return lab->Run(command, error); };
  if (!step("ip netns add " + lan)) return nullptr;
  lab->made_.push_back(lan);
  if (!step("ip -n " + lan + " link set lo up") || !step("ip -n " + lan + " link add br0 type bridge") ||
      !step("ip -n " + lan + " addr add " + lab->lan_address() + "/24 dev br0") ||
      !step("ip -n " + lan + " link set br0 up")) {
    return nullptr;
  }
  for (int host = 1; host <= hosts; ++host) {
    const std::string ns = lab->HostNs(host);
    const std::string port = "p" + std::to_string(host);
    if (!step("ip netns add " + ns)) return nullptr;
    lab->made_.push_back(ns);
    if (!step("ip -n " + ns + " link set lo up") ||
        !step("ip -n " + ns + " link add eth0 type veth peer name " + port + " netns " + lan) ||
        !step("ip -n " + lan + " link set " + port + " master br0 up") ||
        !step("ip -n " + ns + " addr add " + lab->address(host) + "/24 dev eth0") ||
        !step("ip -n " + ns + " link set eth0 up") ||
        // One table per host; cuts are rules in its input chain.
        !step("ip netns exec " + ns + " nft add table inet cut") ||
        !step("ip netns exec " + ns + " nft 'add chain inet cut in { type filter hook input priority 0; }'")) {
      return nullptr;
    }
  }
  return lab;
}

NetnsLab::~NetnsLab() {
  LeaveLan();
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) Succeeds("ip netns del " + *it);
}

std::vector<std::string> NetnsLab::Exec(int host) const { return {"ip", "netns", "exec", HostNs(host)}; }

bool NetnsLab::EnterLan(std::string* error) {
  if (original_ns_ < 0) original_ns_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  const std::string path = "/var/run/netns/" + Namespace("lan");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
    if (fd >= 0) ::close(fd);
    if (error) *error = "cannot enter " + path;
    return false;
  }
  ::close(fd);
  return true;
}

void NetnsLab::LeaveLan() {
  if (original_ns_ < 0) return;
  ::setns(original_ns_, CLONE_NEWNET);
  ::close(original_ns_);
  original_ns_ = -1;
}

bool NetnsLab::Cut(int from, int to, bool two_way, std::string* error) {
  if (!Run("ip netns exec " + HostNs(to) + " nft add rule inet cut in ip saddr " + address(from) + " drop", error)) {
    return false;
  }
  return !two_way || Cut(to, from, false, error);
}

bool NetnsLab::Blackhole(int host, int peer, bool two_way, std::string* error) {
  if (!Run("ip -n " + HostNs(host) + " route add blackhole " + address(peer) + "/32", error)) return false;
  blackholes_.emplace_back(host, peer);
  return !two_way || Blackhole(peer, host, false, error);
}

bool NetnsLab::HealAll(std::string* error) {
  bool healed = true;
  for (int host = 1; host <= hosts_; ++host) {
    healed = Run("ip netns exec " + HostNs(host) + " nft flush chain inet cut in", error) && healed;
  }
  for (const auto& [host, peer] : blackholes_) {
    healed = Run("ip -n " + HostNs(host) + " route del blackhole " + address(peer) + "/32", error) && healed;
  }
  blackholes_.clear();
  return healed;
}

}  // namespace estuary::server::testing
