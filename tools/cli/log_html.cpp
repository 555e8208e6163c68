#include "log_html.h"

#include "log_common.h"

#include "support/error.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/raw_ostream.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace specjit::cli {

namespace {

constexpr int k_width = 900;      // the timeline's drawing width (fits a 1200-pixel window)
constexpr int k_label_width = 220; // kernel names left of it
constexpr int k_row_height = 34;
constexpr const char* k_warmup_colour = "#2f6fd0";
constexpr const char* k_serving_colour = "#e07b00";
constexpr const char* k_storm_colour = "#c0182b";
constexpr const char* k_refusal_colour = "#222222";

std::string escape(llvm::StringRef text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    case '\'': out += "&#39;"; break;
    default: out.push_back(c);
    }
  }
  return out;
}

const char* k_style = R"(body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d1d1f;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}
.meta{color:#555}table{border-collapse:collapse;margin-top:4px}
td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child,td.text{text-align:left}
th{background:#f2f2f4}.legend span{display:inline-block;margin-right:16px}
.sw{display:inline-block;width:12px;height:12px;border-radius:6px;vertical-align:-1px;margin-right:4px}
svg text{font:12px system-ui,sans-serif;fill:#333}.bad{color:#c0182b;font-weight:600})";

struct Axis {
  int64_t first = 0, last = 1;
  double x(int64_t micros) const {
    double span = static_cast<double>(std::max<int64_t>(last - first, 1));
    return k_label_width + 8 + (static_cast<double>(micros - first) / span) * (k_width - 16);
  }
};

// Radius grows with the compile's time: a 10 s compile stands out of a row of 100 ms ones.
double radius(double ms) { return std::clamp(2.0 + std::log10(std::max(ms, 1.0)) * 2.2, 2.5, 10.0); }

void draw_row(std::string& svg, const Axis& axis, int y, const std::string& kernel,
              const std::vector<TimelinePoint>& points) {
  svg += fmt::format("<text x='4' y='{}'>{}</text>", y + 4, escape(kernel));
  svg += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='#ccc'/>", k_label_width + 8, y,
                     k_label_width + k_width - 8, y);
  for (const TimelinePoint& p : points) {
    double x = axis.x(p.ts_micros);
    if (p.kind == deploy::EventKind::compile)
      svg += fmt::format("<circle cx='{:.1f}' cy='{}' r='{:.1f}' fill='{}' fill-opacity='0.75'>"
                         "<title>{:.1f} ms ({})</title></circle>",
                         x, y, radius(p.ms), p.serving ? k_serving_colour : k_warmup_colour, p.ms,
                         p.serving ? "serving" : "warmup");
    else if (p.kind == deploy::EventKind::storm)
      svg += fmt::format("<path d='M{0:.1f} {1} l7 12 h-14 z' fill='{2}'><title>storm: {3}"
                         "</title></path>",
                         x, y - 14, k_storm_colour, escape(p.label));
    else
      svg += fmt::format("<path d='M{0:.1f} {1} l10 10 m0 -10 l-10 10' transform='translate(-5 0)' "
                         "stroke='{2}' stroke-width='2.5'><title>refused (strict): {3}</title>"
                         "</path>",
                         x, y - 5, k_refusal_colour, escape(p.label));
  }
}

std::string timeline_svg(const LogSummary& log) {
  Axis axis;
  if (log.first())
    axis = {*log.first(), std::max(*log.last(), *log.first() + 1)};
  size_t rows = std::max<size_t>(log.points().size(), 1);
  int height = static_cast<int>(rows) * k_row_height + 40;
  std::string svg = fmt::format("<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' "
                                "role='img' aria-label='compile timeline'>",
                                k_label_width + k_width, height);
  svg += fmt::format("<rect width='100%' height='100%' fill='#fafafc'/>");
  int y = 24;
  for (const auto& [kernel, points] : log.points()) {
    draw_row(svg, axis, y, kernel, points);
    y += k_row_height;
  }
  if (log.first()) // the axis: first and last time stamps, and the middle
    for (double f : {0.0, 0.5, 1.0}) {
      int64_t at = axis.first + static_cast<int64_t>(f * static_cast<double>(axis.last - axis.first));
      svg += fmt::format("<text x='{:.0f}' y='{}' text-anchor='{}'>{}</text>", axis.x(at),
                         height - 8, f == 0.0 ? "start" : f == 1.0 ? "end" : "middle",
                         format_micros(at));
    }
  return svg + "</svg>";
}

std::string kernel_table(const LogSummary& log) {
  std::string out = "<table><tr><th>kernel</th><th>compiles</th><th>serving</th><th>disk hits"
                    "</th><th>compile s</th><th>variants</th><th>refused</th><th>storms</th></tr>";
  for (const auto& [kernel, s] : log.kernels()) {
    std::string storms;
    for (const auto& [param, distinct] : s.storms)
      storms += fmt::format("{}{} ({} values)", storms.empty() ? "" : ", ", escape(param), distinct);
    out += fmt::format("<tr><td>{}</td><td>{}</td><td{}>{}</td><td>{}</td><td>{:.2f}</td><td>{}"
                       "</td><td{}>{}</td><td class='text{}'>{}</td></tr>",
                       escape(kernel), s.compiles, s.serving_compiles ? " class='bad'" : "",
                       s.serving_compiles, s.disk_hits, s.compile_ms / 1000.0, s.variants.size(),
                       s.refusals ? " class='bad'" : "", s.refusals, storms.empty() ? "" : " bad",
                       storms.empty() ? "-" : storms);
  }
  return out + "</table>";
}

std::string slowest_table(const LogSummary& log) {
  std::string out = "<table><tr><th>ms</th><th>kernel</th><th>variant</th><th>reason</th>"
                    "<th>phase</th><th>when</th></tr>";
  for (const SlowCompile& c : log.slowest())
    out += fmt::format("<tr><td>{:.1f}</td><td class='text'>{}</td><td class='text'>{}</td>"
                       "<td class='text'>{}</td><td class='text'>{}</td><td class='text'>{}</td>"
                       "</tr>",
                       c.ms, escape(c.kernel), escape(variant_text(c.variant())), escape(c.reason),
                       escape(c.phase), escape(c.ts));
  return out + "</table>";
}

} // namespace

std::string render_log_page(const std::string& log_path, const deploy::LogScan& scan,
                            const LogSummary& log) {
  std::string span = log.first() ? fmt::format("{} .. {}", format_micros(*log.first()),
                                               format_micros(*log.last()))
                                 : "no time stamps";
  std::string page = fmt::format(
      "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
      "<title>specjit recompilation log</title><style>{}</style></head><body>"
      "<h1>specjit recompilation log</h1><div class='meta'>{} &middot; {} events in {} file{}"
      "{} &middot; {}</div>",
      k_style, escape(log_path), log.events(), scan.files.size(), scan.files.size() == 1 ? "" : "s",
      scan.bad_lines ? fmt::format(" &middot; {} unreadable lines skipped", scan.bad_lines) : "",
      span);
  page += fmt::format(
      "<h2>Compile timeline</h2><div class='legend'><span><i class='sw' style='background:{}'>"
      "</i>warm-up compile</span><span><i class='sw' style='background:{}'></i>serving compile"
      "</span><span style='color:{}'>&#9650; storm</span><span>&#10006; strict refusal</span>"
      "<span>circle size: compile time</span></div>",
      k_warmup_colour, k_serving_colour, k_storm_colour);
  page += timeline_svg(log);
  if (log.dropped_points())
    page += fmt::format("<p class='meta'>{} more compiles are counted in the tables but not "
                        "drawn (at most {} per kernel).</p>",
                        log.dropped_points(), k_max_points_per_kernel);
  page += "<h2>Kernels</h2>" + kernel_table(log);
  page += "<h2>Slowest compiles</h2>" + slowest_table(log);
  return page + "</body></html>\n";
}

llvm::Error write_log_page(const std::string& page, const std::string& log_path,
                           const deploy::LogScan& scan, const LogSummary& log) {
  std::string text = render_log_page(log_path, scan, log);
  std::string temp = page + ".tmp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(temp, ec);
    if (ec)
      return make_error(Errc::io, "cannot write {}: {}", page, ec.message());
    out << text;
    out.close();
    if (out.has_error()) {
      std::string message = out.error().message();
      out.clear_error();
      llvm::sys::fs::remove(temp);
      return make_error(Errc::io, "cannot write {}: {}", page, message);
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(temp, page)) {
    llvm::sys::fs::remove(temp);
    return make_error(Errc::io, "cannot write {}: {}", page, ec.message());
  }
  return llvm::Error::success();
}

} // namespace specjit::cli
