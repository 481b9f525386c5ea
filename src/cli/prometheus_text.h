// Reading samples back from a Prometheus text exposition (syv's GET /metrics) for `syv bench
// serve` and `syv verify`: a metric's samples with their labels (values unescaped), their sum,
// or their split by one label.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace syv::cli {

struct PrometheusSample {
  std::map<std::string, std::string> labels;  // label -> value, escapes (\\ \" \n) undone
  double value = 0;
};

// Every sample line of `name` ("name 3", "name{a=\"x\",b=\"y\"} 2" ...), in order; lines of
// other metrics (a name that merely starts with this one) and malformed label sets are skipped.
std::vector<PrometheusSample> prometheus_samples(const std::string& text, const std::string& name);

// The sum of `name`'s samples; -1 when there is none.
double prometheus_sum(const std::string& text, const std::string& name);

// `name`'s samples by the value of `label` (`name{label="v"} x` -> {"v": x}); samples without
// the label are skipped; empty when there is none.
std::map<std::string, double> prometheus_by_label(const std::string& text, const std::string& name,
                                                  const std::string& label);

}  // namespace syv::cli
