// `syv bench serve --plot FILE.svg`: an SVG drawn by syv itself (no plotting library). Up to two
// panels: the sweep's output throughput against its median inter-token latency, one point per
// concurrency; and the cumulative distributions of TTFT, inter-token and end-to-end latency over
// every request measured (log-scaled milliseconds).
#pragma once

#include <string>
#include <vector>

#include "cli/bench_serve_stats.h"
#include "core/status.h"

namespace syv::cli {

// `sweep`: the sweep's runs in order of concurrency (may be empty: no throughput panel);
// `runs`: every run whose latencies go into the distributions.
Status write_bench_plot(const std::string& path, const std::vector<RunStats>& sweep,
                        const std::vector<RunStats>& runs);

}  // namespace syv::cli
