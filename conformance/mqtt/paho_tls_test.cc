// Eclipse Paho MQTT C++ over TLS (issue 21 point 7; docs/security.md
// "TLS"): a client that trusts the node's CA talks MQTT 5 over `--mqtts`; a
// device certificate's CN becomes the user name the ACL knows
// (`--tls-require-client-cert`, `--tls-identity-as-username`); a client
// without a certificate, or trusting another CA, is refused and the node
// serves others all the same. Certificates come from the io/tls test
// support (the OpenSSL API, into a temporary folder).
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "conformance/mqtt/broker_fixture.h"
#include "conformance/mqtt/paho_client.h"
#include "io/tls/tls_test_certs.h"

namespace estuary::conformance {
namespace {

using io::test_support::CertificateFiles;
using io::test_support::TestCertificates;

class PahoTlsTest : public BrokerFixture {
 public:
  static void SetUpTestSuite() {
    certs_ = new TestCertificates("Estuary Paho Test CA");
    device_ = new CertificateFiles(certs_->Client("device-7"));
    other_ca_ = new TestCertificates("Some Other CA");
    acl_file_ = new std::string(certs_->folder() + "/acl");
    std::ofstream(*acl_file_) << "user device-7\ntopic readwrite dev/device-7/#\n";
  }
  static void TearDownTestSuite() {
    delete acl_file_;
    delete other_ca_;
    delete device_;
    delete certs_;
  }

 protected:
  std::vector<std::string> SuiteFlags() const override {
    const io::TlsSettings server = certs_->Server();
    return {"--mqtts", "127.0.0.1:0", "--tls-cert", server.cert_file, "--tls-key", server.key_file,
            "--tls-ca", certs_->ca_file()};
  }
  // The ssl:// address from the ready line's mqtts=HOST:PORT, by name (the
  // server certificate is for "localhost").
  std::string TlsUri() const {
    const std::string& line = const_cast<PahoTlsTest*>(this)->broker().ready_line();
    const size_t at = line.find(" mqtts=");
    EXPECT_NE(at, std::string::npos) << line;
    if (at == std::string::npos) return {};
    const size_t colon = line.find(':', at);
    const size_t end = line.find(' ', colon);
    return "ssl://localhost:" + line.substr(colon + 1, end == std::string::npos ? std::string::npos : end - colon - 1);
  }
  static paho::ssl_options Trusting(const std::string& ca_file, const CertificateFiles* client = nullptr) {
    paho::ssl_options ssl;
    ssl.set_trust_store(ca_file);
    ssl.set_enable_server_cert_auth(true);
    ssl.set_verify(true);  // the server's name too
    if (client != nullptr) {
      ssl.set_key_store(client->cert);
      ssl.set_private_key(client->key);
    }
    return ssl;
  }

  static TestCertificates* certs_;
  static CertificateFiles* device_;
  static TestCertificates* other_ca_;
  static std::string* acl_file_;
};

TestCertificates* PahoTlsTest::certs_ = nullptr;
CertificateFiles* PahoTlsTest::device_ = nullptr;
TestCertificates* PahoTlsTest::other_ca_ = nullptr;
std::string* PahoTlsTest::acl_file_ = nullptr;

TEST_F(PahoTlsTest, AClientTrustingTheNodesCaExchangesMessagesOverTls) {
  PahoClient client(TlsUri(), Unique("paho-tls"), MQTTVERSION_5);
  PahoClient::ConnectOptions options;
  options.ssl = Trusting(certs_->ca_file());
  EXPECT_EQ(client.Connect(options).get_mqtt_version(), MQTTVERSION_5);
  const std::string topic = Unique("tls/t");
  ASSERT_EQ(client.Subscribe(topic, 2), std::vector<paho::ReasonCode>{paho::ReasonCode::GRANTED_QOS_2});
  client.Publish(topic, "over TLS", 2);
  // And a clear-text publisher reaches the TLS subscriber: one broker.
  RawPublish(topic, "from clear text", 1);
  auto first = client.Next();
  auto second = client.Next();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->get_payload_str(), "over TLS");
  EXPECT_EQ(second->get_payload_str(), "from clear text");
}

TEST_F(PahoTlsTest, ADeviceCertificatesNameIsItsUserNameForTheAcl) {
  // The two switches take no value; as "=true" they pair up for MergeFlags.
  RestartBroker({"--tls-require-client-cert=true", "--tls-identity-as-username=true", "--acl-file", *acl_file_});
  PahoClient device(TlsUri(), Unique("device"), MQTTVERSION_5);
  PahoClient::ConnectOptions options;
  options.ssl = Trusting(certs_->ca_file(), device_);
  device.Connect(options);
  // The ACL grants user device-7 its own tree only.
  EXPECT_EQ(device.Subscribe("dev/device-7/#", 1), std::vector<paho::ReasonCode>{paho::ReasonCode::GRANTED_QOS_1});
  // Paho fails a SUBSCRIBE whose every reason code is an error: 0x87.
  try {
    device.Subscribe("dev/device-8/#", 1);
    ADD_FAILURE() << "another device's tree was granted";
  } catch (const paho::exception& refused) {
    EXPECT_EQ(refused.get_reason_code(), paho::ReasonCode::NOT_AUTHORIZED) << refused.what();
  }
  device.Publish("dev/device-7/temperature", "21.5", 1);
  auto got = device.Next();
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->get_payload_str(), "21.5");

  // No certificate: the handshake is refused, the node serves others.
  PahoClient anonymous(TlsUri(), Unique("no-cert"), MQTTVERSION_5);
  PahoClient::ConnectOptions without;
  without.ssl = Trusting(certs_->ca_file());
  EXPECT_THROW(anonymous.Connect(without), paho::exception);
  // (The ACL gives anonymous clients nothing: the device itself shows
  // that the node still serves.)
  PahoClient again(TlsUri(), Unique("device-again"), MQTTVERSION_5);
  again.Connect(options);
  EXPECT_EQ(again.Subscribe("dev/device-7/#", 1), std::vector<paho::ReasonCode>{paho::ReasonCode::GRANTED_QOS_1});
}

TEST_F(PahoTlsTest, AClientTrustingAnotherCaRefusesTheNodeAndNoOneElseIsHurt) {
  PahoClient client(TlsUri(), Unique("wrong-ca"), MQTTVERSION_5);
  PahoClient::ConnectOptions options;
  options.ssl = Trusting(other_ca_->ca_file());
  EXPECT_THROW(client.Connect(options), paho::exception);
  // Clear text to the TLS port: not an MQTT connection either.
  PahoClient plain("tcp" + TlsUri().substr(3), Unique("plain-to-tls"), MQTTVERSION_5);
  EXPECT_THROW(plain.Connect(), paho::exception);
  PahoClient good(TlsUri(), Unique("right-ca"), MQTTVERSION_5);
  PahoClient::ConnectOptions right;
  right.ssl = Trusting(certs_->ca_file());
  EXPECT_NO_THROW(good.Connect(right));
  ExpectBrokerServes();
}

}  // namespace
}  // namespace estuary::conformance
