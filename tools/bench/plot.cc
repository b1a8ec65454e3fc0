#include "tools/bench/plot.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>

namespace estuary::bench {
namespace {

double Ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

// gnuplot's strings are single-quoted: a quote inside is doubled.
std::string Quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string PlotData(const Summary& summary) {
  std::string out = "# at_s received p50_ms p90_ms p99_ms p999_ms max_ms\n";
  for (const Summary::Second& point : summary.timeline) {
    out += fmt::format("{:.3f} {} {:.4f} {:.4f} {:.4f} {:.4f} {:.4f}\n", point.at_s, point.received, Ms(point.p50_ns),
                       Ms(point.p90_ns), Ms(point.p99_ns), Ms(point.p999_ns), Ms(point.max_ns));
  }
  return out;
}

std::string PlotScript(const std::string& image, const std::string& data_file, const std::string& title) {
  const bool svg = image.ends_with(".svg");
  std::string script;
  script += svg ? "set terminal svg size 900,700 dynamic font 'sans,11'\n"
                : "set terminal pngcairo size 900,700 font 'sans,10'\n";
  script += "set output " + Quoted(image) + "\n";
  script += "set multiplot layout 2,1 title " + Quoted(title) + "\n";
  script += "set grid\nset key outside right\nset xlabel 'second of the run (from the start of publishing)'\n";
  script += "set ylabel 'latency (ms)'\nset logscale y\n";
  const std::string data = Quoted(data_file);
  script += "plot " + data + " using 1:3 with linespoints title 'p50', " + data +
            " using 1:4 with linespoints title 'p90', " + data + " using 1:5 with linespoints title 'p99', " +
            data + " using 1:6 with linespoints title 'p99.9', " + data + " using 1:7 with points pt 6 title 'max'\n";
  script += "unset logscale y\nset ylabel 'messages received / s'\nset yrange [0:*]\n";
  script += "plot " + data + " using 1:2 with boxes fill solid 0.5 title 'received/s'\n";
  script += "unset multiplot\n";
  return script;
}

Expected<void, std::string> WritePlot(const std::string& image, const Summary& summary, const std::string& title) {
  if (summary.timeline.empty()) return MakeError(std::string("--plot: no message was received, nothing to draw"));
  const std::string data_file = image + ".dat";
  {
    std::ofstream out(data_file);
    out << PlotData(summary);
    if (!out) return MakeError("--plot: cannot write " + data_file);
  }
  // gnuplot reads the script on stdin; its own errors go to our stderr.
  std::FILE* gnuplot = ::popen("gnuplot", "w");
  if (gnuplot == nullptr) return MakeError(std::string("--plot: cannot run gnuplot (Debian package gnuplot-nox)"));
  const std::string script = PlotScript(image, data_file, title);
  std::fwrite(script.data(), 1, script.size(), gnuplot);
  const int status = ::pclose(gnuplot);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return MakeError(fmt::format("--plot: gnuplot failed (exit status {}; is gnuplot-nox installed?)",
                                 WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  return {};
}

}  // namespace estuary::bench
