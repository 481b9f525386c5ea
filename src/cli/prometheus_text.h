// Reading samples back from a Prometheus text exposition (syv's GET /metrics) for `syv bench
// serve` and `syv verify`: a metric's value summed over its label sets, or split by one label.
#pragma once

#include <map>
#include <string>

namespace syv::cli {

// The sum of `name`'s samples ("name 3", "name{a=\"x\"} 2" ...); -1 when there is none.
double prometheus_sum(const std::string& text, const std::string& name);

// `name`'s samples by the value of `label` (`name{label="v"} x` -> {"v": x}); samples without
// the label are skipped; empty when there is none.
std::map<std::string, double> prometheus_by_label(const std::string& text, const std::string& name,
                                                  const std::string& label);

}  // namespace syv::cli
