#pragma once
// Starting a loopback cluster of estuaryd processes in a test and waiting
// until every member is up, with the cluster's convergence deadline. Shared
// by the conformance cluster tests (cluster_fixture.h, Paho clients) and
// estuaryd's node process tests (server/tests/process_support.h, raw
// clients); it needs no client library.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "conformance/cluster/cluster_process.h"

namespace estuary::conformance {

// Generous for a shared 2-core machine; a passing run takes a fraction.
inline constexpr std::chrono::seconds kConverge{20};

inline std::unique_ptr<testing::ClusterProcess> StartCluster(testing::ClusterProcess::Options options) {
  std::string error;
  auto cluster = testing::ClusterProcess::Start(options, &error);
  EXPECT_NE(cluster, nullptr) << error;
  if (!cluster) return nullptr;
  std::string why;
  EXPECT_TRUE(cluster->WaitMembersUp(kConverge, &why)) << "members never all up: " << why;
  return cluster;
}

}  // namespace estuary::conformance
