#pragma once
// HostNetwork: the separate "hosts" of `estuary-cluster start --netns`
// (issue 24 point 2), each a network namespace with its own address on one
// bridge, as separate machines on a LAN would be. Root only.
//
//   the machine's own namespace: bridge est<tag>br, 10.80.X.254/24, so the
//     user (and the launcher's health checks) reach every host directly
//   namespace est<tag><host>: lo up, eth0 10.80.X.<octet>/24, the other end
//     of its veth (est<tag>v<host>) a port of the bridge
//
// <tag> is 4 random hex digits, new at every run and checked unused; X is
// the first 10.80.X.0/24 that no address or route of the machine overlaps.
// Every object is appended to a record file (DIR/netns.list) the moment it
// exists, with its kernel identity (interface index, namespace inode), so
// Remove and a later RemoveRecorded (after a crashed launcher) delete
// exactly what this run made: a listed name that now names something else
// is left alone. The processes inside must be stopped before removal (the
// destructor removes too). One thread.
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace estuary::launcher {

struct NetnsHost {
  std::string name;  // "n1", "lb1": short, the namespace is est<tag><name>
  int octet = 0;     // last byte of its address, 1..253
};

class HostNetwork {
 public:
  // Why --netns cannot work here ("" when it can): not root, no `ip`.
  static std::string Unavailable();
  // Makes the bridge and one namespace per host; null with `error` (and
  // everything made so far removed) on failure.
  static std::unique_ptr<HostNetwork> Create(const std::string& record_path, const std::vector<NetnsHost>& hosts,
                                             std::string* error);
  // Deletes what `record_path` lists (newest first) and then the file,
  // unless the launcher that wrote it still runs. Fills `report` with what
  // was removed or skipped; false when a deletion failed or the writer runs.
  static bool RemoveRecorded(const std::string& record_path, std::string* report);

  ~HostNetwork();
  HostNetwork(const HostNetwork&) = delete;
  HostNetwork& operator=(const HostNetwork&) = delete;

  // Removes everything this run made (once; later calls do nothing).
  bool Remove(std::string* report);

  const std::string& tag() const { return tag_; }  // "est" + 4 hex digits
  const std::string& bridge() const { return bridge_; }
  std::string bridge_address() const { return Address(254); }
  std::string subnet() const { return Address(0) + "/24"; }
  std::string Address(int octet) const { return prefix_ + std::to_string(octet); }
  std::string Namespace(const std::string& host) const { return tag_ + host; }
  // The file setns(2) takes to enter `host`'s namespace.
  std::string NamespacePath(const std::string& host) const { return "/var/run/netns/" + Namespace(host); }

 private:
  HostNetwork() = default;
  bool Build(const std::vector<NetnsHost>& hosts, std::string* error);
  bool Record(const std::string& kind, const std::string& name, std::string* error);

  std::string record_path_;
  std::string tag_;
  std::string bridge_;
  std::string prefix_;  // "10.80.X."
  bool removed_ = false;
};

}  // namespace estuary::launcher
