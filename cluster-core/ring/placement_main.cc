// estuary-placement: compares partition placement schemes on balance and
// movement (docs/placement.md).
//   estuary-placement [--partitions P] [--replicas R] [--epsilon E] [--nodes 3,5,...]
// For each N: max/mean replicas and leaders per node, and the replicas
// copied by one join (5 different joiners) and one leave (every node in
// turn; jump hash: the last node only) over the least possible (the
// joiner's fair share, the leaver's load). 1.00 is ideal.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "base/hash.h"
#include "cluster-core/ring/ring.h"

namespace {

using estuary::base::Mix64;
using estuary::base::StableHash;
using estuary::ring::Ring;
using estuary::ring::RingOptions;

// Replicas of every partition, as node names, preferred leader first.
using Placement = std::vector<std::vector<std::string>>;
using Scheme = std::function<Placement(const std::vector<std::string>& nodes)>;

struct Params {
  std::uint32_t partitions = RingOptions{}.partitions;
  std::uint32_t replicas = RingOptions{}.replicas;
  double epsilon = RingOptions{}.epsilon;
};

Scheme RingScheme(const Params& params, double epsilon) {
  return [params, epsilon](const std::vector<std::string>& nodes) {
    RingOptions options{.partitions = params.partitions, .replicas = params.replicas,
                        .epsilon = epsilon};
    auto ring = Ring::Build(nodes, options);
    Placement placement(params.partitions);
    if (!ring) return placement;
    for (std::uint32_t p = 0; p < params.partitions; ++p) placement[p] = ring->Replicas(p);
    return placement;
  };
}

// Rendezvous (highest random weight): the R nodes with the highest
// hash(node, partition).
Scheme RendezvousScheme(const Params& params) {
  return [params](const std::vector<std::string>& nodes) {
    Placement placement(params.partitions);
    std::vector<std::uint64_t> node_hashes;
    for (const std::string& node : nodes) node_hashes.push_back(StableHash(node));
    const std::size_t count = std::min<std::size_t>(params.replicas, nodes.size());
    for (std::uint32_t p = 0; p < params.partitions; ++p) {
      std::vector<std::pair<std::uint64_t, std::size_t>> scores;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        scores.push_back({Mix64(node_hashes[i] ^ Mix64(p + 1)), i});
      }
      std::partial_sort(scores.begin(), scores.begin() + static_cast<std::ptrdiff_t>(count),
                        scores.end(), std::greater<>());
      for (std::size_t r = 0; r < count; ++r) placement[p].push_back(nodes[scores[r].second]);
    }
    return placement;
  };
}

// Lamping and Veach's jump consistent hash: buckets 0..N-1 in the order
// nodes joined; only the last bucket can leave without renumbering.
std::int32_t JumpHash(std::uint64_t key, std::int32_t buckets) {
  std::int64_t b = -1;
  std::int64_t j = 0;
  while (j < buckets) {
    b = j;
    key = key * 2862933555777941757ULL + 1;
    j = static_cast<std::int64_t>(static_cast<double>(b + 1) *
                                  (static_cast<double>(1LL << 31) /
                                   static_cast<double>((key >> 33) + 1)));
  }
  return static_cast<std::int32_t>(b);
}

// Replica r of partition p: jump hash of (p, attempt), skipping buckets
// already chosen.
Scheme JumpScheme(const Params& params) {
  return [params](const std::vector<std::string>& nodes) {
    Placement placement(params.partitions);
    const auto buckets = static_cast<std::int32_t>(nodes.size());
    const std::size_t count = std::min<std::size_t>(params.replicas, nodes.size());
    for (std::uint32_t p = 0; p < params.partitions; ++p) {
      std::vector<std::int32_t> chosen;
      for (std::uint64_t attempt = 0; chosen.size() < count; ++attempt) {
        const std::int32_t b = JumpHash(Mix64((std::uint64_t{p} << 20) + attempt), buckets);
        if (std::find(chosen.begin(), chosen.end(), b) == chosen.end()) chosen.push_back(b);
      }
      for (std::int32_t b : chosen) placement[p].push_back(nodes[static_cast<std::size_t>(b)]);
    }
    return placement;
  };
}

std::vector<std::string> NodeNames(std::uint32_t n) {
  std::vector<std::string> names;
  for (std::uint32_t i = 0; i < n; ++i) names.push_back("node-" + std::to_string(i));
  return names;
}

struct Balance {
  double replicas = 0;
  double leaders = 0;
};

Balance MaxOverMean(const Placement& placement, const std::vector<std::string>& nodes) {
  std::vector<double> loads(nodes.size(), 0);
  std::vector<double> leaders(nodes.size(), 0);
  for (const auto& replicas : placement) {
    for (std::size_t r = 0; r < replicas.size(); ++r) {
      const auto i = static_cast<std::size_t>(
          std::find(nodes.begin(), nodes.end(), replicas[r]) - nodes.begin());
      loads[i] += 1;
      if (r == 0) leaders[i] += 1;
    }
  }
  auto ratio = [](const std::vector<double>& v) {
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    return *std::max_element(v.begin(), v.end()) / mean;
  };
  return Balance{ratio(loads), ratio(leaders)};
}

// Replica copies from `before` to `after`, and the load of `node` before.
std::size_t Copies(const Placement& before, const Placement& after) {
  std::size_t copies = 0;
  for (std::size_t p = 0; p < before.size(); ++p) {
    for (const std::string& node : after[p]) {
      if (std::find(before[p].begin(), before[p].end(), node) == before[p].end()) ++copies;
    }
  }
  return copies;
}

std::size_t LoadOf(const Placement& placement, const std::string& node) {
  std::size_t load = 0;
  for (const auto& replicas : placement) {
    load += static_cast<std::size_t>(std::count(replicas.begin(), replicas.end(), node));
  }
  return load;
}

struct Row {
  Balance balance;
  double join_mean = 0, join_worst = 0, leave_mean = 0, leave_worst = 0;
};

Row Measure(const Scheme& scheme, const Params& params, std::uint32_t n, bool last_leaves_only) {
  const std::vector<std::string> nodes = NodeNames(n);
  const Placement base = scheme(nodes);
  Row row;
  row.balance = MaxOverMean(base, nodes);
  const double join_ideal =
      static_cast<double>(params.partitions) * std::min(params.replicas, n + 1) / (n + 1);
  constexpr int kJoins = 5;
  for (int t = 0; t < kJoins; ++t) {
    std::vector<std::string> joined = nodes;
    joined.push_back("joiner-" + std::to_string(t));
    const double ratio = static_cast<double>(Copies(base, scheme(joined))) / join_ideal;
    row.join_mean += ratio / kJoins;
    row.join_worst = std::max(row.join_worst, ratio);
  }
  if (n <= params.replicas) return row;  // survivors already hold everything
  std::uint32_t leaves = 0;
  for (std::uint32_t i = last_leaves_only ? n - 1 : 0; i < n; ++i) {
    std::vector<std::string> left = nodes;
    left.erase(left.begin() + i);
    const double ideal = static_cast<double>(LoadOf(base, nodes[i]));
    const double ratio = static_cast<double>(Copies(base, scheme(left))) / ideal;
    row.leave_mean += ratio;
    row.leave_worst = std::max(row.leave_worst, ratio);
    ++leaves;
  }
  row.leave_mean /= leaves;
  return row;
}

bool ParseList(std::string_view text, std::vector<std::uint32_t>& out) {
  out.clear();
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    std::uint32_t value = 0;
    auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (error != std::errc() || end != item.data() + item.size() || value == 0) return false;
    out.push_back(value);
    text = comma == std::string_view::npos ? "" : text.substr(comma + 1);
  }
  return !out.empty();
}

int Usage() {
  std::fputs(
      "usage: estuary-placement [--partitions P] [--replicas R] [--epsilon E] [--nodes N1,N2,...]\n"
      "Compares the bounded-load ring (epsilon E and 0.25), plain virtual-node hashing,\n"
      "rendezvous hashing and jump hash: max/mean load and replicas copied per join/leave\n"
      "over the ideal (docs/placement.md).\n",
      stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Params params;
  std::vector<std::uint32_t> node_counts{3, 5, 10, 20, 40, 64};
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || i + 1 >= argc) return Usage();
    const std::string value = argv[++i];
    char* end = nullptr;
    if (flag == "--partitions") {
      params.partitions = static_cast<std::uint32_t>(std::strtoul(value.c_str(), &end, 10));
    } else if (flag == "--replicas") {
      params.replicas = static_cast<std::uint32_t>(std::strtoul(value.c_str(), &end, 10));
    } else if (flag == "--epsilon") {
      params.epsilon = std::strtod(value.c_str(), &end);
    } else if (flag == "--nodes") {
      if (!ParseList(value, node_counts)) return Usage();
      continue;
    } else {
      return Usage();
    }
    if (end == value.c_str() || *end != '\0' || params.partitions == 0 || params.replicas == 0) {
      return Usage();
    }
  }
  struct Named {
    std::string name;
    Scheme scheme;
    bool last_leaves_only = false;
  };
  char ring_name[32];
  std::snprintf(ring_name, sizeof ring_name, "ring e=%.2f", params.epsilon);
  const std::vector<Named> schemes{
      {ring_name, RingScheme(params, params.epsilon)},
      {"ring e=0.25", RingScheme(params, 0.25)},
      {"vnodes", RingScheme(params, -1.0)},
      {"rendezvous", RendezvousScheme(params)},
      {"jump", JumpScheme(params), true},
  };
  std::printf("P=%u R=%u; movement = replicas copied / least possible (1.00 ideal)\n",
              params.partitions, params.replicas);
  std::printf("| scheme      |  N | max/mean | leaders | join mean | join worst | leave mean | leave worst |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (std::uint32_t n : node_counts) {
    for (const Named& named : schemes) {
      const Row row = Measure(named.scheme, params, n, named.last_leaves_only);
      std::printf("| %-11s | %2u | %8.3f | %7.3f | %9.2f | %10.2f | %10.2f | %11.2f |\n",
                  named.name.c_str(), n, row.balance.replicas, row.balance.leaders, row.join_mean,
                  row.join_worst, row.leave_mean, row.leave_worst);
    }
  }
  return 0;
}
