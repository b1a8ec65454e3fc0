#include "io/uv/tcp_stream.h"

#include <gtest/gtest.h>

#include <cctype>

#include "io/uv/test_util.h"

namespace estuary::io {
namespace {

using testing::RunUntil;

// A session that sees only io::Stream: echoes in upper case, pausing and
// resuming through the interface.
TEST(TcpStreamTest, ASessionDrivesTheConnectionThroughTheStreamInterface) {
  UvLoop loop;
  std::unique_ptr<TcpStream> server_stream;
  auto listener = TcpListener::Listen(loop, {"127.0.0.1", 0}, [&](int fd) {
    auto connection = TcpConnection::Adopt(loop, fd);
    server_stream = std::make_unique<TcpStream>(connection);
    Stream* stream = server_stream.get();
    connection->SetHandlers({.on_data = [stream](std::string_view bytes) {
      for (char c : bytes) stream->output().push_back(static_cast<char>(std::toupper(c)));
      stream->Flush();
      if (bytes.find('!') != std::string_view::npos) stream->Close();
    }});
  });
  ASSERT_TRUE(listener.has_value());
  std::string received;
  int closed = 1;
  auto client = TcpConnection::Connect(loop, {"127.0.0.1", (*listener)->port()}, [](int) {});
  client->SetHandlers({
      .on_data = [&](std::string_view bytes) { received.append(bytes); },
      .on_close = [&](int status) { closed = status; },
  });
  client->Write("hello");
  ASSERT_TRUE(RunUntil(loop, [&] { return received == "HELLO"; }));
  EXPECT_EQ(server_stream->queued_bytes(), 0u);
  EXPECT_EQ(server_stream->peer_address().rfind("127.0.0.1:", 0), 0u);

  server_stream->PauseReading();
  client->Write(" world!");
  // A write the other way, flushed after the client's, proves the loop ran
  // while the server was paused.
  server_stream->output() += "~";
  server_stream->Flush();
  ASSERT_TRUE(RunUntil(loop, [&] { return received == "HELLO~"; }));
  server_stream->ResumeReading();
  ASSERT_TRUE(RunUntil(loop, [&] { return closed != 1; }));
  EXPECT_EQ(received, "HELLO~ WORLD!");
  EXPECT_EQ(closed, UV_EOF);
}

}  // namespace
}  // namespace estuary::io
