#include "balancer/heartbeat_auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "balancer/lb_config.h"

namespace estuary::balancer {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;  // a wall clock, in ms

Heartbeat Active(uint64_t epoch) { return {epoch, Role::kActive, 1, "127.0.0.1:7946", {{"127.0.0.1:8080", true, false, 2}}}; }

HeartbeatReject ReasonOf(const Expected<Heartbeat, Rejected>& opened) {
  EXPECT_FALSE(opened);
  return opened ? HeartbeatReject::kMalformed : opened.error().reason;
}

TEST(HeartbeatAuthTest, MacIsHmacSha256OfTheBytes) {
  // RFC 4231, test case 2.
  EXPECT_EQ(HeartbeatMac("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(NewBootId().size(), 32u);
  EXPECT_NE(NewBootId(), NewBootId());
}

TEST(HeartbeatAuthTest, ASealedHeartbeatIsAcceptedWithItsFields) {
  HeartbeatAuth sender("s3cret", "boot-a");
  HeartbeatAuth receiver("s3cret", "boot-b");
  const std::string datagram = sender.Seal(Active(4), kNow);
  auto opened = receiver.Open(datagram, kNow + 30);
  ASSERT_TRUE(opened) << opened.error().detail;
  EXPECT_EQ(opened->epoch, 4u);
  EXPECT_EQ(opened->role, Role::kActive);
  EXPECT_EQ(opened->boot, "boot-a");
  EXPECT_EQ(opened->seq, 1u);
  EXPECT_EQ(opened->sent_ms, kNow);
  EXPECT_EQ(opened->nodes, Active(4).nodes);
  // The next one has the next sequence and is accepted too.
  auto next = receiver.Open(sender.Seal(Active(4), kNow + 100), kNow + 100);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->seq, 2u);
}

TEST(HeartbeatAuthTest, EveryTamperedByteIsRejected) {
  HeartbeatAuth sender("s3cret", "boot-a");
  const std::string datagram = sender.Seal(Active(4), kNow);
  for (size_t i = 0; i < datagram.size(); ++i) {
    HeartbeatAuth receiver("s3cret", "boot-b");
    std::string tampered = datagram;
    tampered[i] = static_cast<char>(tampered[i] ^ 0x01);
    auto opened = receiver.Open(tampered, kNow);
    EXPECT_FALSE(opened) << "byte " << i << " flipped was accepted";
  }
  // A higher epoch written into the JSON, MAC kept: bad MAC.
  std::string forged = datagram;
  forged.replace(forged.find("\"epoch\":4"), 9, "\"epoch\":9");
  HeartbeatAuth receiver("s3cret", "boot-b");
  EXPECT_EQ(ReasonOf(receiver.Open(forged, kNow)), HeartbeatReject::kBadMac);
  EXPECT_TRUE(receiver.Open(datagram, kNow));  // the original still passes
}

TEST(HeartbeatAuthTest, AWrongSecretOrNoMacIsRejected) {
  HeartbeatAuth other("not the secret", "boot-x");
  HeartbeatAuth receiver("s3cret", "boot-b");
  EXPECT_EQ(ReasonOf(receiver.Open(other.Seal(Active(9), kNow), kNow)), HeartbeatReject::kBadMac);
  EXPECT_EQ(ReasonOf(receiver.Open(EncodeHeartbeat(Active(9)), kNow)), HeartbeatReject::kUnauthenticated);
  EXPECT_EQ(ReasonOf(receiver.Open(EncodeHeartbeat(Active(9)) + "\nzz", kNow)), HeartbeatReject::kBadMac);
  EXPECT_EQ(ReasonOf(receiver.Open("", kNow)), HeartbeatReject::kUnauthenticated);
  // Right MAC over bytes that are not a sealed heartbeat.
  const std::string plain = EncodeHeartbeat(Active(9));
  EXPECT_EQ(ReasonOf(receiver.Open(plain + "\n" + HeartbeatMac("s3cret", plain), kNow)), HeartbeatReject::kMalformed);
  EXPECT_EQ(ReasonOf(receiver.Open("junk\n" + HeartbeatMac("s3cret", "junk"), kNow)), HeartbeatReject::kMalformed);
}

TEST(HeartbeatAuthTest, AReplayedHeartbeatIsRejected) {
  HeartbeatAuth sender("s3cret", "boot-a");
  HeartbeatAuth receiver("s3cret", "boot-b");
  const std::string first = sender.Seal(Active(4), kNow);
  const std::string second = sender.Seal(Active(4), kNow + 100);
  ASSERT_TRUE(receiver.Open(first, kNow));
  EXPECT_EQ(ReasonOf(receiver.Open(first, kNow + 10)), HeartbeatReject::kReplay);
  ASSERT_TRUE(receiver.Open(second, kNow + 100));
  // Older than the last accepted, though never seen before (reordered): refused.
  HeartbeatAuth receiver2("s3cret", "boot-c");
  ASSERT_TRUE(receiver2.Open(second, kNow + 100));
  EXPECT_EQ(ReasonOf(receiver2.Open(first, kNow + 100)), HeartbeatReject::kReplay);
}

TEST(HeartbeatAuthTest, AHeartbeatFromAnOldBootIsRejectedOnceOutsideTheWindow) {
  HeartbeatAuth old_boot("s3cret", "boot-old");
  const std::string recorded = old_boot.Seal(Active(7), kNow);
  HeartbeatAuth receiver("s3cret", "boot-b", {.max_age_ms = 5000});
  // The partner restarted: a new boot id is accepted with a valid MAC.
  HeartbeatAuth new_boot("s3cret", "boot-new");
  ASSERT_TRUE(receiver.Open(new_boot.Seal(Active(2), kNow + 60'000), kNow + 60'000));
  // The old boot's recording, a minute later: stale, whatever its sequence.
  EXPECT_EQ(ReasonOf(receiver.Open(recorded, kNow + 60'000)), HeartbeatReject::kStale);
  // A sender clock too far ahead is refused as well.
  EXPECT_EQ(ReasonOf(receiver.Open(new_boot.Seal(Active(2), kNow + 70'000), kNow + 60'100)), HeartbeatReject::kStale);
  // Within the window either way, accepted.
  EXPECT_TRUE(receiver.Open(new_boot.Seal(Active(2), kNow + 64'000), kNow + 60'200));
}

TEST(HeartbeatAuthTest, BootsAreForgottenAfterTheWindowAndBounded) {
  HeartbeatAuth receiver("s3cret", "me", {.max_age_ms = 1000, .max_boots = 4});
  for (int i = 0; i < 10; ++i) {
    HeartbeatAuth sender("s3cret", "boot-" + std::to_string(i));
    ASSERT_TRUE(receiver.Open(sender.Seal(Active(1), kNow + i), kNow + i));
  }
  EXPECT_EQ(receiver.boots_known(), 4u);
  HeartbeatAuth late("s3cret", "boot-late");
  ASSERT_TRUE(receiver.Open(late.Seal(Active(1), kNow + 5000), kNow + 5000));
  EXPECT_EQ(receiver.boots_known(), 1u);
}

TEST(HeartbeatAuthTest, TheSecretFileMustExistBeNonEmptyAndPrivate) {
  char dir_template[] = "/tmp/estuary-lb-secret-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string path = dir + "/secret";
  EXPECT_FALSE(ReadPairSecret(dir + "/missing"));
  {
    std::ofstream out(path);
    out << "\n";
  }
  ::chmod(path.c_str(), 0600);
  auto empty = ReadPairSecret(path);
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().find("empty"), std::string::npos);
  {
    std::ofstream out(path);
    out << "correct horse battery staple\n";
  }
  auto secret = ReadPairSecret(path);
  ASSERT_TRUE(secret) << secret.error();
  EXPECT_EQ(*secret, "correct horse battery staple");
  ::chmod(path.c_str(), 0640);
  auto open = ReadPairSecret(path);
  ASSERT_FALSE(open);
  EXPECT_NE(open.error().find("chmod 600"), std::string::npos);
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace estuary::balancer
