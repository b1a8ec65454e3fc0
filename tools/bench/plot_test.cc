// estuary-bench --plot (tools/bench/plot.h): the timeline a run keeps, the
// data and script given to gnuplot, and a real drawing when gnuplot is
// installed (Debian gnuplot-nox).
#include "tools/bench/plot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tools/bench/fake_broker.h"
#include "tools/bench/options.h"
#include "tools/bench/run.h"

namespace estuary::bench {
namespace {

Options PlotOptions(const testing::FakeBroker& broker, const std::string& plot) {
  std::vector<std::string> args = {"estuary-bench", "--broker", broker.endpoint().ToString(), "-q", "1", "-n",
                                   "2000", "--plot", plot};
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  auto options = ParseOptions(static_cast<int>(argv.size()), argv.data());
  EXPECT_TRUE(options) << options.error().text;
  return options ? *options : Options{};
}

TEST(PlotTest, PlotNeedsPngOrSvg) {
  const char* argv[] = {"estuary-bench", "--plot", "out.jpg"};
  EXPECT_FALSE(ParseOptions(3, argv));
}

TEST(PlotTest, RunKeepsOnePointPerSecondCoveringEveryDelivery) {
  testing::FakeBroker broker;
  const Options options = PlotOptions(broker, ::testing::TempDir() + "unused.svg");
  const TrafficOutcome outcome = MeasureTraffic(options, broker.endpoint());
  ASSERT_FALSE(outcome.error) << *outcome.error;
  ASSERT_FALSE(outcome.summary.timeline.empty());
  uint64_t received = 0;
  for (const Summary::Second& point : outcome.summary.timeline) {
    received += point.received;
    EXPECT_LE(point.p50_ns, point.p99_ns);
    EXPECT_LE(point.p99_ns, point.max_ns);
  }
  EXPECT_EQ(received, outcome.summary.latency.count());
  const std::string data = PlotData(outcome.summary);
  EXPECT_EQ(std::count(data.begin(), data.end(), '\n'), 1 + long(outcome.summary.timeline.size()));
}

TEST(PlotTest, ScriptPicksTheTerminalFromTheExtension) {
  EXPECT_NE(PlotScript("a.svg", "a.svg.dat", "t").find("set terminal svg"), std::string::npos);
  EXPECT_NE(PlotScript("a.png", "a.png.dat", "t").find("set terminal pngcairo"), std::string::npos);
  EXPECT_NE(PlotScript("a.png", "a.png.dat", "it's").find("'it''s'"), std::string::npos);
}

TEST(PlotTest, DrawsAnSvgWithGnuplot) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot not installed";
  testing::FakeBroker broker;
  const std::string image = ::testing::TempDir() + "estuary_plot_test.svg";
  std::filesystem::remove(image);
  const Options options = PlotOptions(broker, image);
  const TrafficOutcome outcome = MeasureTraffic(options, broker.endpoint());
  ASSERT_FALSE(outcome.error) << *outcome.error;
  ASSERT_TRUE(WritePlot(image, outcome.summary, "plot test").has_value());
  std::ifstream in(image);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("<svg"), std::string::npos);
}

}  // namespace
}  // namespace estuary::bench
