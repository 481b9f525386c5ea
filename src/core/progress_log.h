// A progress line about every 10 s through a long loop, with the time left at the rate so far:
// "calibration: pass 1/2: window 40/64 in 61 s, ~31 s left" (`syv quantize`).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/log.h"

namespace syv {

class ProgressLog {
 public:
  // Logs "<what> <done>/<total> in T s, ~L s left" when 10 s have passed since the last line
  // (or the start); nothing before the first item is done.
  void report(const std::string& what, int64_t done, int64_t total) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (t - last_ < 10.0 || done <= 0) return;
    last_ = t;
    const double left = t / static_cast<double>(done) * static_cast<double>(total - done);
    SYV_LOG(INFO) << what << " " << done << "/" << total << " in " << static_cast<int64_t>(t)
                  << " s, ~" << static_cast<int64_t>(left) << " s left";
  }

 private:
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  double last_ = 0.0;
};

}  // namespace syv
