#include "tuning/generation.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "tuning/rank_exchange.h"

namespace hjit::tuning {

int generation_size(int ranks) { return std::max(8, ranks); }

std::vector<std::string> generation_strings(const Generation& g) {
  std::vector<std::string> out{std::to_string(g.timeout_s), std::to_string(g.remaining_s)};
  out.insert(out.end(), g.requests.begin(), g.requests.end());
  return out;
}

Generation parse_generation(const std::vector<std::string>& strings) {
  Generation g;
  if (strings.size() < 2) return g;
  g.timeout_s = std::atof(strings[0].c_str()), g.remaining_s = std::atof(strings[1].c_str());
  g.requests.assign(strings.begin() + 2, strings.end());
  return g;
}

std::vector<Measured> measure_share(const Generation& g, int rank, int ranks,
                                    const std::function<Measurement(size_t, double)>& measure,
                                    const std::function<bool()>& stop) {
  const auto start = std::chrono::steady_clock::now();
  auto into = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::vector<Measured> share;
  for (size_t k = size_t(rank); k < g.requests.size(); k += size_t(ranks)) {
    const double left = g.remaining_s - into();
    if (left <= 0 || stop()) break;
    // A candidate started near the end may run a little past it, not a whole timeout.
    Measured done;
    done.index = k;
    done.m = measure(k, std::min(g.timeout_s, std::max(10.0, left + 5)));
    if (stop()) break;  // stopped while measuring: not a measurement
    done.at_s = into();
    share.push_back(std::move(done));
  }
  return share;
}

std::string format_share(const std::vector<Measured>& share) {
  std::vector<std::string> each;
  for (const Measured& d : share) {
    char head[64];
    std::snprintf(head, sizeof head, "%zu %.6f\n", d.index, d.at_s);
    each.push_back(head + format_result(d.m));
  }
  return pack_strings(each);
}

std::vector<Measured> parse_share(const std::string& text) {
  std::vector<Measured> share;
  for (const std::string& s : unpack_strings(text)) {
    const size_t line = s.find('\n');
    Measured d;
    unsigned long long index = 0;
    if (line == std::string::npos || std::sscanf(s.c_str(), "%llu %lf", &index, &d.at_s) != 2) continue;
    d.index = size_t(index);
    d.m = parse_result(s.substr(line + 1));
    share.push_back(std::move(d));
  }
  return share;
}

}  // namespace hjit::tuning
