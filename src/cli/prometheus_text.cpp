#include "cli/prometheus_text.h"

#include <cstdlib>
#include <optional>
#include <sstream>

namespace syv::cli {
namespace {

bool label_name_char(char c, bool first) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (!first && c >= '0' && c <= '9');
}

// Parses `{a="x",b="y"}` starting at line[at] == '{'; leaves `at` after the '}'. nullopt when
// malformed.
std::optional<std::map<std::string, std::string>> parse_labels(const std::string& line,
                                                               size_t& at) {
  std::map<std::string, std::string> labels;
  ++at;  // '{'
  while (at < line.size() && line[at] != '}') {
    const size_t name_start = at;
    while (at < line.size() && label_name_char(line[at], at == name_start)) ++at;
    if (at == name_start || at + 1 >= line.size() || line[at] != '=' || line[at + 1] != '"')
      return std::nullopt;
    const std::string name = line.substr(name_start, at - name_start);
    at += 2;
    std::string value;
    for (;; ++at) {
      if (at >= line.size()) return std::nullopt;
      const char c = line[at];
      if (c == '"') break;
      if (c == '\\') {
        if (++at >= line.size()) return std::nullopt;
        value += line[at] == 'n' ? '\n' : line[at];
      } else {
        value += c;
      }
    }
    ++at;  // the closing quote
    labels[name] = std::move(value);
    if (at < line.size() && line[at] == ',') ++at;
  }
  if (at >= line.size()) return std::nullopt;
  ++at;  // '}'
  return labels;
}

}  // namespace

std::vector<PrometheusSample> prometheus_samples(const std::string& text, const std::string& name) {
  std::vector<PrometheusSample> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, name.size(), name) != 0 || line.size() <= name.size()) continue;
    size_t at = name.size();
    PrometheusSample sample;
    if (line[at] == '{') {
      auto labels = parse_labels(line, at);
      if (!labels) continue;
      sample.labels = std::move(*labels);
    }
    if (at >= line.size() || line[at] != ' ') continue;  // another metric whose name starts so
    sample.value = std::atof(line.c_str() + at + 1);
    out.push_back(std::move(sample));
  }
  return out;
}

double prometheus_sum(const std::string& text, const std::string& name) {
  const std::vector<PrometheusSample> samples = prometheus_samples(text, name);
  if (samples.empty()) return -1;
  double sum = 0;
  for (const PrometheusSample& s : samples) sum += s.value;
  return sum;
}

std::map<std::string, double> prometheus_by_label(const std::string& text, const std::string& name,
                                                  const std::string& label) {
  std::map<std::string, double> out;
  for (const PrometheusSample& s : prometheus_samples(text, name)) {
    auto it = s.labels.find(label);
    if (it != s.labels.end()) out[it->second] += s.value;
  }
  return out;
}

}  // namespace syv::cli
