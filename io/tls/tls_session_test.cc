// TlsContext and TlsSession paired in memory: a client session and a
// server session pass their output to each other until both are quiet.
#include "io/tls/tls_session.h"

#include <gtest/gtest.h>

#include "io/tls/tls_context.h"
#include "io/tls/tls_test_certs.h"

namespace estuary::io {
namespace {

using test_support::CertificateFiles;
using test_support::TestCertificates;

struct Pair {
  std::unique_ptr<TlsSession> client;
  std::unique_ptr<TlsSession> server;
  std::string client_received;
  std::string server_received;

  // Moves bytes both ways until neither side has anything to send;
  // `chunk` > 0 hands the server its bytes that many at a time.
  void Pump(size_t chunk = 0) {
    for (int round = 0; round < 100 && (client->has_output() || server->has_output()); ++round) {
      std::string to_server;
      client->TakeOutput(to_server);
      for (size_t at = 0; at < to_server.size();) {
        const size_t size = chunk == 0 ? to_server.size() : std::min(chunk, to_server.size() - at);
        server->Receive(std::string_view(to_server).substr(at, size), server_received);
        at += size;
      }
      std::string to_client;
      server->TakeOutput(to_client);
      client->Receive(to_client, client_received);
    }
  }
};

Pair Connect(TlsContext& server, const std::string& ca, const CertificateFiles& client_files = {},
             const std::shared_ptr<ssl_session_st>& resume = nullptr) {
  auto client_context = BuildClientContext(ca, client_files.cert, client_files.key);
  EXPECT_TRUE(client_context.has_value()) << (client_context ? "" : client_context.error());
  Pair pair{std::make_unique<TlsSession>(*client_context, /*server=*/false), server.NewSession(), {}, {}};
  pair.client->Connect("localhost", resume);
  pair.Pump();
  return pair;
}

TEST(TlsSession, HandshakesAndCarriesBytesBothWays) {
  TestCertificates certs;
  auto server = TlsContext::Create(certs.Server());
  ASSERT_TRUE(server.has_value()) << server.error();
  Pair pair = Connect(**server, certs.ca_file());
  ASSERT_TRUE(pair.client->open()) << pair.client->error();
  ASSERT_TRUE(pair.server->open()) << pair.server->error();
  EXPECT_EQ(pair.server->protocol_version(), "TLSv1.3");
  ASSERT_TRUE(pair.client->Send("CONNECT bytes"));
  ASSERT_TRUE(pair.server->Send(std::string(40'000, 'x')));  // more than one record
  pair.Pump();
  EXPECT_EQ(pair.server_received, "CONNECT bytes");
  EXPECT_EQ(pair.client_received, std::string(40'000, 'x'));
  EXPECT_FALSE(pair.server->peer_common_name().has_value()) << "no client certificate was asked for";
}

TEST(TlsSession, BytesOneAtATimeMakeTheSameHandshake) {
  TestCertificates certs;
  auto server = TlsContext::Create(certs.Server());
  ASSERT_TRUE(server.has_value());
  auto client_context = BuildClientContext(certs.ca_file());
  ASSERT_TRUE(client_context.has_value());
  Pair pair{std::make_unique<TlsSession>(*client_context, false), (*server)->NewSession(), {}, {}};
  pair.client->Connect("localhost");
  pair.Pump(/*chunk=*/1);
  EXPECT_TRUE(pair.server->open()) << pair.server->error();
}

TEST(TlsSession, ClientCertificateCommonNameIsTheIdentity) {
  TestCertificates certs;
  auto server = TlsContext::Create(certs.Server(/*verify_clients=*/true, /*require=*/true));
  ASSERT_TRUE(server.has_value()) << server.error();
  Pair pair = Connect(**server, certs.ca_file(), certs.Client("device-7"));
  ASSERT_TRUE(pair.server->open()) << pair.server->error();
  EXPECT_EQ(pair.server->peer_common_name(), "device-7");
}

TEST(TlsSession, RefusedCertificatesSayWhy) {
  TestCertificates certs;
  auto server = TlsContext::Create(certs.Server(true, true));
  ASSERT_TRUE(server.has_value());
  struct Case {
    CertificateFiles files;
    const char* word;
  };
  const Case cases[] = {
      {certs.Client("old", -7200, -3600), "(expired)"},
      {certs.Client("future", 3600, 7200), "(not yet valid)"},
      {certs.Client("selfie", -60, 3600, /*self_signed=*/true), "(self-signed)"},
  };
  for (const Case& refused : cases) {
    Pair pair = Connect(**server, certs.ca_file(), refused.files);
    EXPECT_EQ(pair.server->state(), TlsSession::State::kFailed);
    EXPECT_NE(pair.server->error().find(refused.word), std::string::npos) << pair.server->error();
    EXPECT_NE(pair.server->error().find("client certificate refused"), std::string::npos);
  }
  Pair without = Connect(**server, certs.ca_file());
  EXPECT_EQ(without.server->state(), TlsSession::State::kFailed) << "--tls-require-client-cert";
}

TEST(TlsSession, ResumesFromATicketAcrossAReload) {
  TestCertificates certs;
  auto server = TlsContext::Create(certs.Server());
  ASSERT_TRUE(server.has_value());
  Pair first = Connect(**server, certs.ca_file());
  ASSERT_TRUE(first.client->open());
  EXPECT_FALSE(first.server->resumed());
  std::shared_ptr<ssl_session_st> ticket = first.client->TakeTicket();
  ASSERT_NE(ticket, nullptr);
  Pair second = Connect(**server, certs.ca_file(), {}, ticket);
  EXPECT_TRUE(second.server->resumed());
  // Each connection's newest ticket, as TLS 1.3 clients use them (once).
  ticket = second.client->TakeTicket();
  ASSERT_TRUE((*server)->Reload().has_value());
  Pair after_reload = Connect(**server, certs.ca_file(), {}, ticket);
  EXPECT_TRUE(after_reload.server->resumed()) << "a reload keeps the ticket keys";
}

// TLS 1.3 sends its ticket after the handshake: a session taken before it
// came does not resume, so TakeTicket offers nothing until then.
TEST(TlsSession, ATicketIsOfferedOnlyOnceTheServersTicketCame) {
  TestCertificates certs;
  auto server = TlsContext::Create(certs.Server());
  ASSERT_TRUE(server.has_value());
  auto client_context = BuildClientContext(certs.ca_file(), {}, {});
  ASSERT_TRUE(client_context.has_value());
  TlsSession client(*client_context, /*server=*/false);
  auto server_session = (*server)->NewSession();
  std::string plaintext, bytes;
  client.Connect("localhost");
  client.TakeOutput(bytes);                       // ClientHello
  server_session->Receive(bytes, plaintext);
  bytes.clear();
  server_session->TakeOutput(bytes);              // ServerHello .. Finished
  client.Receive(bytes, plaintext);
  ASSERT_TRUE(client.open()) << client.error();
  EXPECT_EQ(client.TakeTicket(), nullptr) << "the handshake is done, the ticket has not come";
  bytes.clear();
  client.TakeOutput(bytes);                       // the client's Finished
  server_session->Receive(bytes, plaintext);
  bytes.clear();
  server_session->TakeOutput(bytes);              // NewSessionTicket
  client.Receive(bytes, plaintext);
  std::shared_ptr<ssl_session_st> ticket = client.TakeTicket();
  ASSERT_NE(ticket, nullptr);
  Pair resumed = Connect(**server, certs.ca_file(), {}, ticket);
  EXPECT_TRUE(resumed.server->resumed());
}

TEST(TlsSession, GarbageFailsTheSessionWithAReason) {
  TestCertificates certs;
  auto server = TlsContext::Create(certs.Server());
  ASSERT_TRUE(server.has_value());
  auto session = (*server)->NewSession();
  std::string plaintext;
  const std::string mqtt_connect("\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00", 14);
  EXPECT_FALSE(session->Receive(mqtt_connect, plaintext));
  EXPECT_EQ(session->state(), TlsSession::State::kFailed);
  EXPECT_NE(session->error().find("wrong version number"), std::string::npos) << session->error();
  EXPECT_FALSE(session->Receive("more", plaintext)) << "a failed session stays failed";
  EXPECT_TRUE(plaintext.empty());
}

TEST(TlsContext, BadFilesAreNamedAndAReloadFailureKeepsTheOldPair) {
  TestCertificates certs;
  TlsSettings settings = certs.Server();
  settings.key_file = certs.Client("other").key;
  auto mismatched = TlsContext::Create(settings);
  ASSERT_FALSE(mismatched.has_value());
  EXPECT_NE(mismatched.error().find("mismatch"), std::string::npos) << mismatched.error();
  EXPECT_NE(mismatched.error().find("--tls-key"), std::string::npos) << mismatched.error();
  settings.cert_file = certs.folder() + "/missing.pem";
  auto missing = TlsContext::Create(settings);
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().find("missing.pem"), std::string::npos) << missing.error();
}

}  // namespace
}  // namespace estuary::io
