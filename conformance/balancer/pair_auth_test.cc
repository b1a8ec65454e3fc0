// estuary-lb's authenticated heartbeats (--pair-secret-file): the pair works
// and fails over as before, and heartbeats forged by someone who can send
// UDP to the heartbeat port (no MAC, a wrong secret, a stale timestamp) are
// dropped and counted instead of making the active step down.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "balancer/heartbeat_auth.h"
#include "conformance/balancer/balancer_fixture.h"

namespace estuary::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

int ExitStatus(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A private directory holding a secret file; removed at the end.
struct SecretDir {
  std::string dir;
  std::string Write(const std::string& name, const std::string& contents, mode_t mode) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << contents;
    ::chmod(path.c_str(), mode);
    return path;
  }
  SecretDir() {
    char dir_template[] = "/tmp/estuary-lb-auth-XXXXXX";
    dir = ::mkdtemp(dir_template) != nullptr ? dir_template : "";
  }
  ~SecretDir() { ExitStatus("rm -rf '" + dir + "'"); }
};

void SendUdp(uint16_t port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to)),
            ssize_t(bytes.size()));
  ::close(fd);
}

// The value of one sample line of the balancer's /metrics, or -1.
double Metric(const LbProcess& lb, const std::string& sample) {
  const std::string body = HttpRequest(lb.admin_port(), "GET", "/metrics").body;
  const size_t at = body.find("\n" + sample + " ");
  if (at == std::string::npos) return -1;
  return std::stod(body.substr(at + sample.size() + 2));
}

std::string Health(const LbProcess& lb) { return HttpRequest(lb.admin_port(), "GET", "/healthz").body; }

// What an attacker would send: an active at a much higher epoch.
balancer::Heartbeat Forged() {
  return {100, balancer::Role::kActive, 1, "127.0.0.1:9", {}};
}

TEST(EstuaryLbAuthTest, ASecretFileMissingEmptyOrOpenToOthersExitsTwo) {
  SecretDir dir;
  ASSERT_FALSE(dir.dir.empty());
  const std::string lb = LbProcess::DefaultBinary() + " --mqtt 127.0.0.1:0 --amqp 127.0.0.1:0 --heartbeat 127.0.0.1:0";
  EXPECT_EQ(ExitStatus(lb + " --pair-secret-file " + dir.dir + "/missing 2> /dev/null"), 2);
  EXPECT_EQ(ExitStatus(lb + " --pair-secret-file " + dir.Write("empty", "\n", 0600) + " 2> /dev/null"), 2);
  EXPECT_EQ(ExitStatus(lb + " --pair-secret-file " + dir.Write("open", "s3cret\n", 0644) + " 2> /dev/null"), 2);
  // The TOML key takes the flag's name.
  const std::string secret = dir.Write("secret", "s3cret\n", 0600);
  const std::string toml = dir.Write("lb.toml", "pair-secret-file = \"" + secret + "\"\n", 0600);
  auto started = StartLb({"--config", toml});
  ASSERT_TRUE(started);
  EXPECT_EQ(started->role(), "active");
  EXPECT_EQ(started->Stop(), 0);
}

TEST(EstuaryLbAuthTest, APairWithASecretIgnoresForgedHeartbeatsAndStillFailsOver) {
  SecretDir dir;
  ASSERT_FALSE(dir.dir.empty());
  const std::string secret = dir.Write("secret", "a pair secret\n", 0600);
  auto node = StartNode(1, {"--proxy-from", "127.0.0.1"});
  ASSERT_TRUE(node);
  auto a = StartLb({"--nodes", AdminOf(*node), "--role", "active", "--pair-secret-file", secret});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->role(), "active");
  const std::string a_heartbeat = "127.0.0.1:" + std::to_string(a->heartbeat_port());
  auto b = StartLb({"--nodes", AdminOf(*node), "--role", "standby", "--peer", a_heartbeat, "--pair-secret-file", secret});
  ASSERT_TRUE(b);
  EXPECT_EQ(b->role(), "standby");
  // Each accepts the other's sealed heartbeats (a learns b's address from them).
  ASSERT_TRUE(WaitFor([&] { return Metric(*a, "estuary_lb_heartbeats_accepted_total") >= 3 &&
                                   Metric(*b, "estuary_lb_heartbeats_accepted_total") >= 3; },
                      seconds(5)));
  EXPECT_NE(Health(*a).find("ok active epoch=1"), std::string::npos) << Health(*a);

  // Forgeries at epoch 100: plain JSON, sealed with a wrong secret, sealed
  // with the right secret but recorded long ago (an old boot's heartbeat).
  const auto now_ms = std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  SendUdp(a->heartbeat_port(), balancer::EncodeHeartbeat(Forged()));
  balancer::HeartbeatAuth wrong("not the secret", balancer::NewBootId());
  SendUdp(a->heartbeat_port(), wrong.Seal(Forged(), now_ms));
  balancer::HeartbeatAuth old_boot("a pair secret", balancer::NewBootId());
  SendUdp(a->heartbeat_port(), old_boot.Seal(Forged(), now_ms - 60'000));
  ASSERT_TRUE(WaitFor([&] {
    return Metric(*a, "estuary_lb_heartbeats_rejected_total{reason=\"unauthenticated\"}") >= 1 &&
           Metric(*a, "estuary_lb_heartbeats_rejected_total{reason=\"bad_mac\"}") >= 1 &&
           Metric(*a, "estuary_lb_heartbeats_rejected_total{reason=\"stale\"}") >= 1;
  }, seconds(5))) << HttpRequest(a->admin_port(), "GET", "/metrics").body;
  // The active neither stepped down nor took the forged epoch.
  EXPECT_FALSE(a->WaitForLine("role=standby", milliseconds(500)));
  EXPECT_NE(Health(*a).find("ok active epoch=1"), std::string::npos) << Health(*a);
  EXPECT_NE(Health(*b).find("ok standby"), std::string::npos) << Health(*b);

  // Failover as without a secret: kill -9 of the active, the standby takes over.
  a->Kill();
  const auto killed = std::chrono::steady_clock::now();
  auto active_at = b->WaitForLine("role=active", seconds(5));
  ASSERT_TRUE(active_at) << "the standby did not take over";
  std::printf("takeover with a pair secret: standby active %lld ms after kill -9 of the active\n",
              static_cast<long long>(std::chrono::duration_cast<milliseconds>(*active_at - killed).count()));
  EXPECT_NE(Health(*b).find("ok active epoch=2"), std::string::npos) << Health(*b);
  EXPECT_EQ(b->Stop(), 0);
}

// The control: the same plain forgery does make an unauthenticated active
// step down, so the test above shows the secret is what stops it.
TEST(EstuaryLbAuthTest, WithoutASecretAForgedHeartbeatMakesTheActiveStepDown) {
  auto node = StartNode(1);
  ASSERT_TRUE(node);
  auto lb = StartLb({"--nodes", AdminOf(*node), "--role", "active"});
  ASSERT_TRUE(lb);
  ASSERT_EQ(lb->role(), "active");
  SendUdp(lb->heartbeat_port(), balancer::EncodeHeartbeat(Forged()));
  EXPECT_TRUE(lb->WaitForLine("role=standby epoch=100", seconds(5)));
  EXPECT_EQ(lb->Stop(), 0);
}

}  // namespace
}  // namespace estuary::testing
