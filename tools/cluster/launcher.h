#pragma once
// estuary-cluster's two commands. RunStart starts N estuaryd nodes on
// loopback (node 1, then the others with --seeds), optionally the
// estuary-lb pair in front, waits until every node is healthy and sees
// every other node up, prints the endpoints, writes DIR/cluster.pid and
// stays in the foreground until SIGINT/SIGTERM, then stops every child
// (SIGTERM, then SIGKILL after the grace). With --netns each node and
// balancer runs in a network namespace of its own (netns.h), removed
// after the children stop. RunStop signals the launcher
// whose pid is in DIR/cluster.pid and waits for it to exit. One thread.
#include <cstdint>
#include <string>
#include <vector>

namespace estuary::launcher {

struct LaunchOptions {
  int nodes = 3;
  std::string dir = "estuary-cluster";
  std::string estuaryd;    // empty: next to this program
  std::string estuary_lb;  // empty: next to this program
  bool balancers = false;
  // --netns (root): every node and balancer in a network namespace of its
  // own with its own address on a bridge (netns.h); all use the same ports
  // (the bases, or 1883/5672/8080/7000 and 1883/5672/7946 when 0).
  bool netns = false;
  // Mutual TLS on the inter-node links (cluster_tls.h) when estuaryd takes
  // --cluster-tls-cert and `openssl` is found; --no-cluster-tls turns it off.
  bool cluster_tls = true;
  // --admin-token: DIR/admin.token (random, 0600) given to every node and
  // balancer as --admin-token-file; the launcher's own checks send it.
  bool admin_token = false;
  std::string storage = "bitcask";
  std::string sync;        // empty: estuaryd's default
  // Node k listens on base + k - 1; a base of 0 picks free ports.
  uint16_t mqtt_base = 0;
  uint16_t amqp_base = 0;
  uint16_t admin_base = 0;
  uint16_t cluster_base = 0;
  // The balancer pair (with --balancers): active and standby service ports
  // and heartbeat ports (standby = active + 1); 0 picks free ports.
  uint16_t lb_mqtt = 0;
  uint16_t lb_amqp = 0;
  uint16_t lb_mqtt2 = 0;
  uint16_t lb_amqp2 = 0;
  uint16_t lb_heartbeat = 0;
  uint32_t ready_timeout_ms = 60000;
  uint32_t grace_ms = 10000;
  std::vector<std::string> estuaryd_flags;  // after `--`
};

// Exit status: 0 after a clean stop, 1 when start-up failed, 2 when --netns
// cannot work here (not root, no `ip`).
int RunStart(const LaunchOptions& options);
// Exit status: 0 once the launcher exited (or a crashed launcher's
// namespaces listed in DIR/netns.list were removed), 1 when none runs.
int RunStop(const std::string& dir, uint32_t timeout_ms);

}  // namespace estuary::launcher
