// What security costs on a shard thread (docs/security.md has the figures):
//  - a password check: PBKDF2-SHA512 at 101 (mosquitto_passwd's default),
//    1,000 and 10,000 iterations, and a PasswordStore hit (the cache);
//  - an ACL decision: a file with N rules that do not match (user rules,
//    patterns and denies, as a large deployment has) and one that does,
//    N = 0 and N = 1,000. Decide is the uncached walk over the rules;
//    AclClient is what a connection pays per publish or delivery once it
//    has seen the topic (a hash lookup).
//   build/bin/estuary-security-bench
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "security/acl_store.h"
#include "security/password_store.h"

namespace estuary::security {
namespace {

std::shared_ptr<const Acl> MakeAcl(int filler) {
  std::string text;
  for (int i = 0; i < filler; ++i) {
    switch (i % 4) {
      case 0: text += "pattern read fleet" + std::to_string(i) + "/%c/#\n"; break;
      case 1: text += "user other" + std::to_string(i) + "\ntopic readwrite site/" + std::to_string(i) + "/#\n"; break;
      case 2: text += "user device\ntopic deny site/blocked" + std::to_string(i) + "/#\n"; break;
      default: text += "user device\ntopic read site/+/sensor" + std::to_string(i) + "\n"; break;
    }
  }
  text += "user device\ntopic readwrite site/#\n";
  auto acl = Acl::Parse(text, "bench");
  if (!acl) std::abort();
  return std::make_shared<const Acl>(std::move(*acl));
}

std::vector<std::string> Topics() {
  std::vector<std::string> topics;
  for (int i = 0; i < 100; ++i) topics.push_back("site/" + std::to_string(i) + "/floor/temperature");
  return topics;
}

void BM_DecideUncached(benchmark::State& state) {
  const auto acl = MakeAcl(static_cast<int>(state.range(0)));
  const auto topics = Topics();
  const AclIdentity client{"device-17", "device"};
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(acl->Decide(client, topics[i++ % topics.size()]));
  }
  state.counters["rules"] = static_cast<double>(acl->rule_count());
}
BENCHMARK(BM_DecideUncached)->Arg(0)->Arg(1000);

void BM_ClientCached(benchmark::State& state) {
  AclStore store(MakeAcl(static_cast<int>(state.range(0))));
  AclClient client(store, "device-17", std::string("device"));
  const auto topics = Topics();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(client.MayWrite(topics[i++ % topics.size()]));
  }
  state.counters["rules"] = static_cast<double>(store.current()->rule_count());
}
BENCHMARK(BM_ClientCached)->Arg(0)->Arg(1000);

void BM_Subscribe(benchmark::State& state) {
  AclStore store(MakeAcl(static_cast<int>(state.range(0))));
  AclClient client(store, "device-17", std::string("device"));
  for (auto _ : state) benchmark::DoNotOptimize(client.MaySubscribe("site/+/floor/#"));
}
BENCHMARK(BM_Subscribe)->Arg(0)->Arg(1000);

void BM_VerifyPbkdf2(benchmark::State& state) {
  const PasswordHash hash = HashPassword("correct horse", static_cast<uint32_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(VerifyPassword(hash, "correct horse"));
}
BENCHMARK(BM_VerifyPbkdf2)->Arg(101)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

void BM_PasswordStoreCachedCheck(benchmark::State& state) {
  PasswordTable table;
  table.emplace("device", HashPassword("correct horse", static_cast<uint32_t>(state.range(0))));
  PasswordStore store(std::move(table));
  store.Check("device", "correct horse");
  for (auto _ : state) benchmark::DoNotOptimize(store.Check("device", "correct horse"));
}
BENCHMARK(BM_PasswordStoreCachedCheck)->Arg(101)->Arg(10000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace estuary::security

BENCHMARK_MAIN();
