#include "cli/bench_serve_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace syv::cli {
namespace {

constexpr double kPanelW = 560, kPanelH = 360, kMarginL = 70, kMarginB = 50, kMarginT = 40;
constexpr double kMarginR = 20;

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

// One panel's frame at x offset `ox`: axes, title and axis labels; maps data to pixels.
struct Panel {
  double ox, lo_x, hi_x, lo_y, hi_y;
  bool log_x;
  double px(double x) const {
    const double a = log_x ? std::log10(x) : x, lo = log_x ? std::log10(lo_x) : lo_x,
                 hi = log_x ? std::log10(hi_x) : hi_x;
    return ox + kMarginL + (a - lo) / (hi - lo) * (kPanelW - kMarginL - kMarginR);
  }
  double py(double y) const {
    return kMarginT + (1 - (y - lo_y) / (hi_y - lo_y)) * (kPanelH - kMarginT - kMarginB);
  }
};

void frame(std::ostringstream& s, const Panel& p, const std::string& title,
           const std::string& xlabel, const std::string& ylabel) {
  const double x0 = p.ox + kMarginL, x1 = p.ox + kPanelW - kMarginR, y0 = kPanelH - kMarginB,
               y1 = kMarginT;
  s << "<rect x='" << x0 << "' y='" << y1 << "' width='" << x1 - x0 << "' height='" << y0 - y1
    << "' fill='none' stroke='#444'/>\n";
  s << "<text x='" << (x0 + x1) / 2 << "' y='24' text-anchor='middle' font-size='15'>"
    << escape(title) << "</text>\n";
  s << "<text x='" << (x0 + x1) / 2 << "' y='" << kPanelH - 10
    << "' text-anchor='middle' font-size='12'>" << escape(xlabel) << "</text>\n";
  s << "<text x='" << p.ox + 16 << "' y='" << (y0 + y1) / 2 << "' text-anchor='middle' "
    << "font-size='12' transform='rotate(-90 " << p.ox + 16 << " " << (y0 + y1) / 2 << ")'>"
    << escape(ylabel) << "</text>\n";
  // Ticks: 5 linear ones on y; on x, 5 linear ones or each power of 10.
  for (int i = 0; i <= 4; ++i) {
    const double v = p.lo_y + (p.hi_y - p.lo_y) * i / 4;
    s << "<line x1='" << x0 - 4 << "' x2='" << x0 << "' y1='" << p.py(v) << "' y2='" << p.py(v)
      << "' stroke='#444'/><text x='" << x0 - 6 << "' y='" << p.py(v) + 4
      << "' text-anchor='end' font-size='11'>" << num(v) << "</text>\n";
  }
  std::vector<double> xticks;
  if (p.log_x) {
    for (double d = std::pow(10, std::ceil(std::log10(p.lo_x))); d <= p.hi_x * 1.0001; d *= 10)
      xticks.push_back(d);
  } else {
    for (int i = 0; i <= 4; ++i) xticks.push_back(p.lo_x + (p.hi_x - p.lo_x) * i / 4);
  }
  for (double v : xticks) {
    s << "<line x1='" << p.px(v) << "' x2='" << p.px(v) << "' y1='" << y0 << "' y2='" << y0 + 4
      << "' stroke='#444'/><text x='" << p.px(v) << "' y='" << y0 + 17
      << "' text-anchor='middle' font-size='11'>" << num(v) << "</text>\n";
  }
}

void sweep_panel(std::ostringstream& s, double ox, const std::vector<RunStats>& sweep) {
  std::vector<std::pair<double, double>> pts;  // (ITL p50 ms, output tok/s)
  for (const RunStats& r : sweep) {
    std::vector<double> itl;
    for (double x : r.itl_s) itl.push_back(x * 1e3);
    pts.push_back({percentiles(itl).p50, r.output_tokens_per_s()});
  }
  double hx = 1e-9, hy = 1e-9;
  for (auto [x, y] : pts) hx = std::max(hx, x), hy = std::max(hy, y);
  const Panel p{ox, 0, hx * 1.1, 0, hy * 1.1, false};
  frame(s, p, "sweep: throughput vs inter-token latency", "inter-token latency p50 (ms)",
        "output tokens/s");
  s << "<polyline fill='none' stroke='#1f77b4' stroke-width='2' points='";
  for (auto [x, y] : pts) s << p.px(x) << "," << p.py(y) << " ";
  s << "'/>\n";
  for (size_t i = 0; i < pts.size(); ++i) {
    s << "<circle cx='" << p.px(pts[i].first) << "' cy='" << p.py(pts[i].second)
      << "' r='4' fill='#1f77b4'/><text x='" << p.px(pts[i].first) + 6 << "' y='"
      << p.py(pts[i].second) - 6 << "' font-size='11'>c=" << sweep[i].concurrency << "</text>\n";
  }
}

void cdf_panel(std::ostringstream& s, double ox, const std::vector<RunStats>& runs) {
  struct Series {
    const char* name;
    const char* color;
    std::vector<double> ms;
  };
  Series series[] = {{"TTFT", "#d62728", {}}, {"ITL", "#2ca02c", {}}, {"e2e", "#9467bd", {}}};
  for (const RunStats& r : runs) {
    for (double x : r.ttft_s) series[0].ms.push_back(x * 1e3);
    for (double x : r.itl_s) series[1].ms.push_back(x * 1e3);
    for (double x : r.e2e_s) series[2].ms.push_back(x * 1e3);
  }
  double lo = 1e300, hi = 0;
  for (Series& se : series) {
    std::sort(se.ms.begin(), se.ms.end());
    for (double v : se.ms)
      if (v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (hi <= 0) lo = 0.1, hi = 1;
  lo = std::pow(10, std::floor(std::log10(lo)));
  hi = std::pow(10, std::ceil(std::log10(hi * 1.0001)));
  const Panel p{ox, lo, hi, 0, 1, true};
  frame(s, p, "latency distributions (all requests)", "milliseconds (log scale)",
        "fraction of samples <= x");
  int legend = 0;
  for (const Series& se : series) {
    if (se.ms.empty()) continue;
    s << "<polyline fill='none' stroke='" << se.color << "' stroke-width='2' points='";
    const double n = static_cast<double>(se.ms.size());
    for (size_t i = 0; i < se.ms.size(); ++i) {
      const double x = std::max(se.ms[i], lo);
      s << p.px(x) << "," << p.py(i / n) << " " << p.px(x) << "," << p.py((i + 1) / n) << " ";
    }
    s << "'/>\n";
    const double ly = kMarginT + 16 + 16 * legend++;
    s << "<line x1='" << ox + kMarginL + 10 << "' x2='" << ox + kMarginL + 30 << "' y1='" << ly
      << "' y2='" << ly << "' stroke='" << se.color << "' stroke-width='2'/><text x='"
      << ox + kMarginL + 35 << "' y='" << ly + 4 << "' font-size='11'>" << se.name
      << " (n=" << se.ms.size() << ")</text>\n";
  }
}

}  // namespace

Status write_bench_plot(const std::string& path, const std::vector<RunStats>& sweep,
                        const std::vector<RunStats>& runs) {
  std::ostringstream s;
  const int panels = sweep.empty() ? 1 : 2;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << kPanelW * panels << "' height='"
    << kPanelH << "' font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n";
  double ox = 0;
  if (!sweep.empty()) {
    sweep_panel(s, ox, sweep);
    ox += kPanelW;
  }
  cdf_panel(s, ox, runs);
  s << "</svg>\n";
  std::ofstream out(path, std::ios::binary);
  if (!out) return Status::Error("--plot: cannot write " + path);
  out << s.str();
  if (!out.good()) return Status::Error("--plot: error writing " + path);
  return Status::Ok();
}

}  // namespace syv::cli
