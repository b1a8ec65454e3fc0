#pragma once
// What the launcher's tests share (launcher_test.cc, netns_test.cc): they
// run estuary-cluster as a user does, each test in a fresh temp dir, each
// run's output in its own log there. Test support only.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/cluster/child.h"

#ifndef ESTUARY_BIN_DIR
#error "ESTUARY_BIN_DIR must name the directory that holds estuary-cluster"
#endif

namespace estuary::launcher::testing {

inline const std::string kLauncher = std::string(ESTUARY_BIN_DIR) + "/estuary-cluster";

class LauncherRunTest : public ::testing::Test {
 protected:
  explicit LauncherRunTest(std::string dir_prefix) : dir_prefix_(std::move(dir_prefix)) {}
  void SetUp() override {
    std::string pattern = "/tmp/" + dir_prefix_ + "-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // estuary-cluster with `args`, its output to dir_/launcher-K.log.
  std::unique_ptr<Child> Run(std::vector<std::string> args) {
    args.insert(args.begin(), kLauncher);
    std::string error;
    auto child = Child::Spawn("launcher", args, dir_ + "/launcher-" + std::to_string(runs_++) + ".log", &error);
    EXPECT_NE(child, nullptr) << error;
    return child;
  }
  // Runs to completion (60 s at most); the exit status, -1 if none.
  int RunToEnd(std::vector<std::string> args, std::string* output = nullptr) {
    auto child = Run(std::move(args));
    if (child == nullptr) return -1;
    auto status = child->WaitExit(Clock::now() + std::chrono::seconds(60));
    if (output) *output = child->output();
    return status.value_or(-1);
  }

  std::string dir_prefix_;
  std::string dir_;
  int runs_ = 0;
};

}  // namespace estuary::launcher::testing
