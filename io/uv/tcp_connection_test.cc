#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "io/uv/tcp.h"
#include "io/uv/test_util.h"

namespace estuary::io {
namespace {

using testing::BlockingClient;
using testing::LoopThread;
using testing::RunUntil;

std::string Pattern(size_t size) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<char>('a' + (i * 7 + i / 1000) % 26);
  return out;
}

// A listener on 127.0.0.1:0 whose accepted connections go to `on_accept_`.
class TcpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto listener = TcpListener::Listen(loop_, {"127.0.0.1", 0}, [this](int fd) {
      std::shared_ptr<TcpConnection> connection = TcpConnection::Adopt(loop_, fd);
      ASSERT_NE(connection, nullptr);
      accepted_.push_back(connection);
      if (on_accept_) on_accept_(connection);
    });
    ASSERT_TRUE(listener.has_value()) << listener.error();
    listener_ = std::move(*listener);
    ASSERT_NE(listener_->port(), 0);
  }

  // Connects a client and waits until it is open.
  std::shared_ptr<TcpConnection> ConnectClient(TcpConnection::Handlers handlers = {}) {
    int status = 1;
    auto client = TcpConnection::Connect(loop_, {"127.0.0.1", listener_->port()}, [&](int s) { status = s; });
    client->SetHandlers(std::move(handlers));
    EXPECT_TRUE(RunUntil(loop_, [&] { return status != 1 && !accepted_.empty(); }));
    EXPECT_EQ(status, 0);
    return client;
  }

  UvLoop loop_;  // first: destroyed last
  std::unique_ptr<TcpListener> listener_;
  std::vector<std::shared_ptr<TcpConnection>> accepted_;
  std::function<void(const std::shared_ptr<TcpConnection>&)> on_accept_;
};

TEST_F(TcpTest, EchoCoalescesWritesOfOneIterationIntoOneUvWrite) {
  on_accept_ = [](const std::shared_ptr<TcpConnection>& connection) {
    connection->SetHandlers({.on_data = [c = connection.get()](std::string_view bytes) { c->Write(bytes); }});
  };
  std::string received;
  auto client = ConnectClient({.on_data = [&](std::string_view bytes) { received.append(bytes); }});
  std::string expected;
  for (int i = 0; i < 100; ++i) {
    std::string message = "message-" + std::to_string(i) + ";";
    client->Write(message);
    expected += message;
  }
  EXPECT_EQ(client->writes_issued(), 0u);  // nothing before the loop's check phase
  EXPECT_EQ(client->queued_bytes(), expected.size());
  ASSERT_TRUE(RunUntil(loop_, [&] { return received.size() >= expected.size(); }));
  EXPECT_EQ(received, expected);
  EXPECT_EQ(client->writes_issued(), 1u);
  EXPECT_EQ(client->queued_bytes(), 0u);
  EXPECT_FALSE(client->peer_address().empty());
  EXPECT_EQ(client->peer_address(), "127.0.0.1:" + std::to_string(listener_->port()));
}

TEST_F(TcpTest, OutputBufferAndMarkDirtyWriteLikeWrite) {
  std::string received;
  on_accept_ = [&](const std::shared_ptr<TcpConnection>& connection) {
    connection->SetHandlers({.on_data = [&](std::string_view bytes) { received.append(bytes); }});
  };
  auto client = ConnectClient();
  client->output_buffer().append("encoded");
  client->output_buffer().append("-frames");
  client->MarkDirty();
  ASSERT_TRUE(RunUntil(loop_, [&] { return received == "encoded-frames"; }));
  EXPECT_EQ(client->writes_issued(), 1u);
}

// The server does not read, so the first big write stays in flight; what is
// written meanwhile accumulates and goes out in one more uv_write. The
// watermarks latch and on_drain fires once the reader catches up.
TEST_F(TcpTest, WritesAccumulateBehindTheWriteInFlightAndDrainFires) {
  size_t server_received = 0;
  auto client = ConnectClient();
  std::shared_ptr<TcpConnection> server = accepted_.front();  // no handlers: not reading
  int drains = 0;
  client->SetHandlers({.on_drain = [&] { ++drains; }});

  const std::string big = Pattern(32 * 1024 * 1024);
  client->Write(big);
  EXPECT_TRUE(client->above_high_watermark());
  ASSERT_TRUE(RunUntil(loop_, [&] { return client->writes_issued() == 1; }));

  int iterations = 0;
  std::function<void()> write_small = [&] {
    client->Write("0123456789");
    if (++iterations < 50) loop_.Post(write_small);
  };
  loop_.Post(write_small);
  ASSERT_TRUE(RunUntil(loop_, [&] { return iterations == 50; }));
  EXPECT_EQ(client->writes_issued(), 1u);
  EXPECT_EQ(drains, 0);
  EXPECT_TRUE(client->above_high_watermark());
  EXPECT_EQ(client->queued_bytes(), big.size() + 500);

  server->SetHandlers({.on_data = [&](std::string_view bytes) { server_received += bytes.size(); }});
  ASSERT_TRUE(RunUntil(loop_, [&] { return server_received == big.size() + 500; }));
  EXPECT_EQ(client->writes_issued(), 2u);
  EXPECT_EQ(drains, 1);
  EXPECT_FALSE(client->above_high_watermark());
  EXPECT_EQ(client->queued_bytes(), 0u);
}

TEST_F(TcpTest, ReadingStopsAndResumesForBackpressure) {
  std::string received;
  auto client = ConnectClient();
  std::shared_ptr<TcpConnection> server = accepted_.front();
  server->StopReading();
  server->SetHandlers({.on_data = [&](std::string_view bytes) { received.append(bytes); }});
  client->Write("held back");
  // A round trip the other way proves the loop ran while the server was paused.
  std::string echoed;
  client->SetHandlers({.on_data = [&](std::string_view bytes) { echoed.append(bytes); }});
  server->Write("ping");
  ASSERT_TRUE(RunUntil(loop_, [&] { return echoed == "ping"; }));
  EXPECT_TRUE(received.empty());
  server->StartReading();
  ASSERT_TRUE(RunUntil(loop_, [&] { return received == "held back"; }));
}

TEST_F(TcpTest, PeerHalfCloseGivesEofAfterQueuedRepliesAreWritten) {
  int server_status = 1;
  on_accept_ = [&](const std::shared_ptr<TcpConnection>& connection) {
    connection->SetHandlers({
        .on_data = [c = connection.get()](std::string_view bytes) { c->Write("reply:" + std::string(bytes)); },
        .on_close = [&](int status) { server_status = status; },
    });
  };
  std::string reply;
  std::atomic<bool> client_done{false};
  std::thread client([&, port = listener_->port()] {
    BlockingClient socket(port);
    socket.SendAll("hello");
    socket.ShutdownWrite();
    reply = socket.ReadToEnd();
    client_done = true;
    loop_.mailbox().Send([] {});
  });
  bool closed = RunUntil(loop_, [&] { return server_status != 1 && client_done; });
  client.join();
  ASSERT_TRUE(closed);
  EXPECT_EQ(server_status, UV_EOF);
  EXPECT_EQ(reply, "reply:hello");
}

TEST_F(TcpTest, CloseFlushesQueuedBytesThenBothSidesClose) {
  const std::string payload = Pattern(4 * 1024 * 1024 + 17);
  int server_status = 1;
  on_accept_ = [&](const std::shared_ptr<TcpConnection>& connection) {
    connection->SetHandlers({.on_close = [&](int status) { server_status = status; }});
    connection->Write(payload);
    connection->Close();
    connection->Close();  // idempotent
    EXPECT_FALSE(connection->is_open());
    connection->Write("dropped after Close");
  };
  std::string received;
  int client_status = 1;
  auto client = ConnectClient({
      .on_data = [&](std::string_view bytes) { received.append(bytes); },
      .on_close = [&](int status) { client_status = status; },
  });
  ASSERT_TRUE(RunUntil(loop_, [&] { return server_status != 1 && client_status != 1; }));
  EXPECT_EQ(received.size(), payload.size());
  EXPECT_TRUE(received == payload);
  EXPECT_EQ(server_status, 0);
  EXPECT_EQ(client_status, UV_EOF);
  EXPECT_FALSE(client->is_open());
}

TEST_F(TcpTest, OnCloseRunsExactlyOnceWhateverIsCalled) {
  int closes = 0;
  int last_status = 1;
  auto client = ConnectClient({.on_close = [&](int status) {
    ++closes;
    last_status = status;
  }});
  client->Close();
  client->Close();
  client->Abort();  // already closing: no effect
  ASSERT_TRUE(RunUntil(loop_, [&] { return closes > 0; }));
  // One more round trip through the loop must not bring a second call.
  bool ticked = false;
  loop_.AddTimer(1, [&] { ticked = true; });
  ASSERT_TRUE(RunUntil(loop_, [&] { return ticked; }));
  EXPECT_EQ(closes, 1);
  EXPECT_EQ(last_status, 0);
}

TEST_F(TcpTest, AbortSendsResetToThePeer) {
  on_accept_ = [](const std::shared_ptr<TcpConnection>& connection) {
    connection->SetHandlers({.on_data = [c = connection.get()](std::string_view) {
      c->Write("never sent");
      c->Abort();
    }});
  };
  int client_status = 1;
  auto client = ConnectClient({.on_close = [&](int status) { client_status = status; }});
  client->Write("provoke");
  ASSERT_TRUE(RunUntil(loop_, [&] { return client_status != 1; }));
  EXPECT_EQ(client_status, UV_ECONNRESET);
}

TEST_F(TcpTest, OwnerMayDropItsPointerInsideHandlers) {
  bool server_closed = false;
  on_accept_ = [&](const std::shared_ptr<TcpConnection>& connection) {
    TcpConnection* raw = connection.get();
    connection->SetHandlers({
        .on_data = [&, raw](std::string_view bytes) {
          accepted_.clear();  // the last outside reference
          raw->Write(bytes);
          raw->Close();
        },
        .on_close = [&](int) { server_closed = true; },
    });
  };
  std::shared_ptr<TcpConnection> client;
  bool client_closed = false;
  std::string echoed;
  client = ConnectClient({
      .on_data = [&](std::string_view bytes) { echoed.append(bytes); },
      .on_close = [&](int) {
        client.reset();  // drop the only reference from inside on_close
        client_closed = true;
      },
  });
  client->Write("bye");
  ASSERT_TRUE(RunUntil(loop_, [&] { return server_closed && client_closed; }));
  EXPECT_EQ(echoed, "bye");
  EXPECT_EQ(client, nullptr);
}

TEST_F(TcpTest, ConnectionRefusedReachesOnConnectedThenOnClose) {
  // A bound socket that does not listen answers SYN with RST.
  int blocker = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(blocker, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  ::getsockname(blocker, reinterpret_cast<sockaddr*>(&address), &length);
  int connected = 1;
  int closed = 1;
  auto client = TcpConnection::Connect(loop_, {"127.0.0.1", ntohs(address.sin_port)},
                                       [&](int status) { connected = status; });
  client->SetHandlers({.on_close = [&](int status) { closed = status; }});
  EXPECT_EQ(connected, 1);  // never from inside Connect()
  ASSERT_TRUE(RunUntil(loop_, [&] { return closed != 1; }));
  EXPECT_EQ(connected, UV_ECONNREFUSED);
  EXPECT_EQ(closed, UV_ECONNREFUSED);
  ::close(blocker);
}

TEST_F(TcpTest, CloseWhileConnectingCancels) {
  int connected = 1;
  int closed = 1;
  auto client = TcpConnection::Connect(loop_, {"127.0.0.1", listener_->port()},
                                       [&](int status) { connected = status; });
  client->SetHandlers({.on_close = [&](int status) { closed = status; }});
  client->Write("queued before connect");
  client->Close();
  ASSERT_TRUE(RunUntil(loop_, [&] { return closed != 1; }));
  EXPECT_EQ(connected, UV_ECANCELED);
  EXPECT_EQ(closed, 0);
}

// A name from /etc/hosts (other than "localhost", which needs no resolver)
// that maps to 127.0.0.1, so the test never waits on DNS.
std::string LoopbackNameFromHostsFile() {
  std::ifstream hosts("/etc/hosts");
  std::string line;
  while (std::getline(hosts, line)) {
    std::istringstream fields(line);
    std::string address, name;
    if (!(fields >> address) || address != "127.0.0.1") continue;
    while (fields >> name) {
      if (name != "localhost" && name.find('#') == std::string::npos) return name;
    }
  }
  return "";
}

TEST_F(TcpTest, ConnectResolvesHostNames) {
  std::string name = LoopbackNameFromHostsFile();
  if (name.empty()) GTEST_SKIP() << "no name for 127.0.0.1 in /etc/hosts";
  int connected = 1;
  auto client = TcpConnection::Connect(loop_, {name, listener_->port()}, [&](int status) { connected = status; });
  ASSERT_TRUE(RunUntil(loop_, [&] { return connected != 1; }));
  EXPECT_EQ(connected, 0) << name << ": " << uv_strerror(connected);
}

TEST_F(TcpTest, CloseWhileResolvingCancels) {
  std::string name = LoopbackNameFromHostsFile();
  if (name.empty()) GTEST_SKIP() << "no name for 127.0.0.1 in /etc/hosts";
  std::vector<std::string> events;
  auto client = TcpConnection::Connect(loop_, {name, listener_->port()}, [&](int status) {
    events.push_back("connected:" + std::to_string(status));
  });
  client->SetHandlers({.on_close = [&](int status) { events.push_back("closed:" + std::to_string(status)); }});
  client->Close();
  ASSERT_TRUE(RunUntil(loop_, [&] { return events.size() == 2; }));
  EXPECT_EQ(events, (std::vector<std::string>{"connected:" + std::to_string(UV_ECANCELED), "closed:0"}));
}

TEST_F(TcpTest, WritesBeforeConnectGoOutOnceConnected) {
  std::string received;
  on_accept_ = [&](const std::shared_ptr<TcpConnection>& connection) {
    connection->SetHandlers({.on_data = [&](std::string_view bytes) { received.append(bytes); }});
  };
  auto client = TcpConnection::Connect(loop_, {"127.0.0.1", listener_->port()}, [](int) {});
  client->Write("early ");
  client->Write("bird");
  ASSERT_TRUE(RunUntil(loop_, [&] { return received == "early bird"; }));
  EXPECT_EQ(client->writes_issued(), 1u);
}

// Detach on loop A, adopt on loop B (another thread): the byte stream goes
// on where it stopped.
TEST_F(TcpTest, DetachHandsTheStreamToAnotherLoop) {
  LoopThread shard_b;
  std::atomic<bool> detached{false};
  std::string server_a_received;
  on_accept_ = [&](const std::shared_ptr<TcpConnection>& connection) {
    connection->SetHandlers({.on_data = [&, c = connection.get()](std::string_view bytes) {
      server_a_received.append(bytes);
      if (server_a_received != "part1") return;
      int fd = c->Detach();
      ASSERT_GE(fd, 0);
      EXPECT_EQ(c->Detach(), -1);  // already closing
      UvLoop* loop_b = &shard_b.loop();
      loop_b->mailbox().Send([loop_b, fd] {
        auto adopted = TcpConnection::Adopt(*loop_b, fd);
        auto got = std::make_shared<std::string>();
        adopted->SetHandlers({.on_data = [got, c = adopted.get()](std::string_view more) {
          got->append(more);
          if (*got == "part2") {
            c->Write("ack:" + *got);
            c->Close();
          }
        }});
      });
      detached = true;
    }});
  };
  std::string reply;
  int client_status = 1;
  auto client = ConnectClient({
      .on_data = [&](std::string_view bytes) { reply.append(bytes); },
      .on_close = [&](int status) { client_status = status; },
  });
  client->Write("part1");
  ASSERT_TRUE(RunUntil(loop_, [&] { return detached.load(); }));
  client->Write("part2");
  ASSERT_TRUE(RunUntil(loop_, [&] { return client_status != 1; }));
  EXPECT_EQ(reply, "ack:part2");
  EXPECT_EQ(client_status, UV_EOF);
}

TEST_F(TcpTest, DetachRefusesWhileOutputIsInFlight) {
  auto client = ConnectClient();
  client->Write(Pattern(32 * 1024 * 1024));  // the server does not read
  ASSERT_TRUE(RunUntil(loop_, [&] { return client->writes_issued() == 1; }));
  EXPECT_EQ(client->Detach(), -1);
  EXPECT_TRUE(client->is_open());
  client->Abort();
}

TEST_F(TcpTest, LoopDestructionClosesOpenConnectionsWithoutCallbacks) {
  auto token = std::make_shared<int>(0);
  std::weak_ptr<TcpConnection> weak_client;
  {
    UvLoop loop;
    auto listener = TcpListener::Listen(loop, {"127.0.0.1", 0}, [&loop, token](int fd) {
      auto server = TcpConnection::Adopt(loop, fd);
      server->SetHandlers({.on_close = [token](int) { ADD_FAILURE() << "on_close during shutdown"; }});
      server->Write("unsent");
    });
    ASSERT_TRUE(listener.has_value());
    int connected = 1;
    auto client = TcpConnection::Connect(loop, {"127.0.0.1", (*listener)->port()}, [&](int s) { connected = s; });
    client->SetHandlers({.on_close = [token](int) { ADD_FAILURE() << "on_close during shutdown"; }});
    weak_client = client;
    ASSERT_TRUE(RunUntil(loop, [&] { return connected == 0 && token.use_count() >= 4; }));
    client->Write(Pattern(1 << 20));
  }  // listener, then loop: connections are closed by the loop
  EXPECT_EQ(token.use_count(), 1);
  EXPECT_TRUE(weak_client.expired());
}

}  // namespace
}  // namespace estuary::io
