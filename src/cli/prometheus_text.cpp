#include "cli/prometheus_text.h"

#include <cstdlib>
#include <sstream>

namespace syv::cli {
namespace {

// Calls `f(labels, value)` for each sample line of `name` ("" labels when it has none).
template <typename F>
void for_samples(const std::string& text, const std::string& name, F f) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, name.size(), name) != 0 || line.size() <= name.size()) continue;
    const char next = line[name.size()];
    std::string labels;
    size_t value_at;
    if (next == ' ') {
      value_at = name.size() + 1;
    } else if (next == '{') {
      const size_t close = line.find("} ", name.size());
      if (close == std::string::npos) continue;
      labels = line.substr(name.size() + 1, close - name.size() - 1);
      value_at = close + 2;
    } else {
      continue;  // another metric whose name starts with this one
    }
    f(labels, std::atof(line.c_str() + value_at));
  }
}

}  // namespace

double prometheus_sum(const std::string& text, const std::string& name) {
  double sum = -1;
  for_samples(text, name, [&](const std::string&, double v) { sum = (sum < 0 ? 0 : sum) + v; });
  return sum;
}

std::map<std::string, double> prometheus_by_label(const std::string& text, const std::string& name,
                                                  const std::string& label) {
  std::map<std::string, double> out;
  const std::string key = label + "=\"";
  for_samples(text, name, [&](const std::string& labels, double v) {
    const size_t at = labels.find(key);
    if (at == std::string::npos) return;
    const size_t end = labels.find('"', at + key.size());
    if (end == std::string::npos) return;
    out[labels.substr(at + key.size(), end - at - key.size())] += v;
  });
  return out;
}

}  // namespace syv::cli
