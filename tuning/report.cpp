// hjit-tune --report: what a tuning database knows, as a table and as two SVG plots (speed-up over
// the built-in schedule per pipeline; best-so-far speed-up against tuning time).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <hjit/tune.h>

#include "tuning/candidates.h"
#include "tuning/database.h"

namespace hjit {
namespace {

using tuning::CandidateRecord;
using tuning::PipelineRecord;

struct Summary {
  PipelineRecord p;
  std::vector<CandidateRecord> candidates;
  int failed = 0;
  std::string best_origin;
  double best_ms = 0;
  // Speed-ups over the built-in baseline (tuning::speedup: against the baseline timed beside each
  // candidate where it was), 0 where unknown.
  double best_x = 0;
  std::map<std::string, double> best_by_scheduler;  // the fastest valid per scheduler
  double adams_pretrained = 0, adams_retrained = 0;  // Adams2019's best with Halide's weights, with retrained ones
  std::vector<std::pair<double, double>> progress;   // (tuning s, best speed-up so far)
};

Summary summarize(tuning::Database& db, const PipelineRecord& p) {
  Summary s;
  s.p = p;
  s.candidates = db.candidates(p.id);
  double best = 0;
  for (const CandidateRecord& c : s.candidates) {
    if (!c.valid) {
      ++s.failed;
      continue;
    }
    const double x = tuning::speedup(c, p.builtin_ms);
    double& b = s.best_by_scheduler[tuning::scheduler_of(c.origin)];
    b = std::max(b, x);
    if (tuning::scheduler_of(c.origin) == "Adams2019") {
      double& a = c.origin.find(" weights=") == std::string::npos ? s.adams_pretrained : s.adams_retrained;
      a = std::max(a, x);
    }
    if (x > best) s.progress.emplace_back(c.at_s, best = x);
  }
  // What jit() uses: the candidate marked best, which the confirmation at the end of a run may
  // have given back to the built-in baseline although another once measured faster.
  if (std::optional<CandidateRecord> b = db.best(p.id))
    s.best_ms = b->ms, s.best_x = tuning::speedup(*b, p.builtin_ms), s.best_origin = b->origin;
  return s;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string times(double x) { return x > 0 ? fmt("%.2fx", x) : "-"; }

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

const char* const kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                               "#b07aa1", "#ff9da7", "#9c755f", "#1f1f1f", "#8cd17d", "#499894"};
constexpr size_t kNumColors = sizeof(kColors) / sizeof(kColors[0]);

std::string color_of(const std::string& scheduler) {
  if (scheduler == "built-in") return kColors[0];
  if (scheduler == "Adams2019") return kColors[1];
  if (scheduler == "Li2018") return kColors[2];
  if (scheduler == "Mullapudi2016") return kColors[3];
  return kColors[4];
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw ValueError("hjit-tune --report: cannot write '" + path + "'");
}

// Horizontal bars: one per pipeline, coloured by the scheduler of its best schedule.
std::string speedup_svg(const std::vector<Summary>& rows) {
  const int bar_h = 22, left = 230, width = 760, top = 40;
  double max_x = 1.5;
  for (const Summary& s : rows)
    max_x = std::max(max_x, s.best_x * 1.1);
  const int height = top + int(rows.size()) * (bar_h + 6) + 50;
  auto x_of = [&](double v) { return left + (width - left - 20) * v / max_x; };
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n"
    << "<text x='10' y='22' font-size='15' font-weight='bold'>Speed-up of the best tuned schedule over the built-in one</text>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Summary& s = rows[i];
    const int y = top + int(i) * (bar_h + 6);
    const double v = s.best_x;
    o << "<text x='" << left - 8 << "' y='" << y + 15 << "' text-anchor='end'>" << escape(s.p.name.substr(0, 32)) << "</text>\n";
    o << "<rect x='" << left << "' y='" << y << "' width='" << x_of(v) - left << "' height='" << bar_h << "' fill='"
      << color_of(tuning::scheduler_of(s.best_origin)) << "'><title>" << escape(s.best_origin) << "</title></rect>\n";
    o << "<text x='" << x_of(v) + 4 << "' y='" << y + 15 << "'>" << fmt("%.2fx", v) << "</text>\n";
  }
  const int axis_y = top + int(rows.size()) * (bar_h + 6);
  o << "<line x1='" << x_of(1) << "' y1='" << top - 6 << "' x2='" << x_of(1) << "' y2='" << axis_y
    << "' stroke='black' stroke-dasharray='4,3'/>\n<text x='" << x_of(1) - 12 << "' y='" << axis_y + 16 << "'>1.0x</text>\n";
  int lx = left;
  for (const char* name : {"built-in", "Adams2019", "Li2018", "Mullapudi2016"}) {
    o << "<rect x='" << lx << "' y='" << axis_y + 26 << "' width='12' height='12' fill='" << color_of(name) << "'/><text x='"
      << lx + 16 << "' y='" << axis_y + 36 << "'>" << name << "</text>\n";
    lx += 120;
  }
  o << "</svg>\n";
  return o.str();
}

// Best-so-far speed-up against tuning time, one step line per pipeline.
std::string progress_svg(const std::vector<Summary>& rows) {
  const int width = 760, height = 420, left = 60, right = 200, top = 40, bottom = 50;
  double max_t = 1, max_y = 1.5;
  for (const Summary& s : rows) {
    max_t = std::max(max_t, s.p.tuning_s);
    for (auto [t, v] : s.progress) max_y = std::max(max_y, v * 1.1);
  }
  auto x_of = [&](double t) { return left + (width - left - right) * t / max_t; };
  auto y_of = [&](double v) { return height - bottom - (height - top - bottom) * v / max_y; };
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n"
    << "<text x='10' y='22' font-size='15' font-weight='bold'>Best speed-up over the built-in schedule against tuning time</text>\n"
    << "<line x1='" << left << "' y1='" << height - bottom << "' x2='" << width - right << "' y2='" << height - bottom
    << "' stroke='black'/>\n<line x1='" << left << "' y1='" << top << "' x2='" << left << "' y2='" << height - bottom
    << "' stroke='black'/>\n<text x='" << (left + width - right) / 2 << "' y='" << height - 12
    << "' text-anchor='middle'>tuning time (s)</text>\n";
  for (int k = 0; k <= 4; ++k) {
    const double t = max_t * k / 4, v = max_y * k / 4;
    o << "<text x='" << x_of(t) << "' y='" << height - bottom + 16 << "' text-anchor='middle'>" << fmt("%.0f", t) << "</text>\n";
    o << "<text x='" << left - 6 << "' y='" << y_of(v) + 4 << "' text-anchor='end'>" << fmt("%.1fx", v) << "</text>\n";
  }
  o << "<line x1='" << left << "' y1='" << y_of(1) << "' x2='" << width - right << "' y2='" << y_of(1)
    << "' stroke='gray' stroke-dasharray='4,3'/>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Summary& s = rows[i];
    if (s.progress.empty()) continue;
    const char* color = kColors[i % kNumColors];
    std::string points;
    double last = s.progress.front().second;
    for (auto [t, v] : s.progress) {
      points += fmt("%.1f", x_of(t)) + "," + fmt("%.1f", y_of(last)) + " " + fmt("%.1f", x_of(t)) + "," + fmt("%.1f", y_of(v)) + " ";
      last = v;
    }
    points += fmt("%.1f", x_of(s.p.tuning_s)) + "," + fmt("%.1f", y_of(last));
    o << "<polyline fill='none' stroke='" << color << "' stroke-width='2' points='" << points << "'/>\n";
    o << "<text x='" << width - right + 8 << "' y='" << top + 16 * int(i) + 10 << "' fill='" << color << "'>"
      << escape(s.p.name.substr(0, 24)) << fmt(" %.2fx", last) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace

std::string tuning_report(const std::string& db_path, const std::string& svg_prefix) {
  std::shared_ptr<tuning::Database> db = tuning::Database::open(db_path, false);
  std::vector<Summary> rows;
  for (const PipelineRecord& p : db->pipelines()) rows.push_back(summarize(*db, p));
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "%-3s %-22s %11s %11s %8s %6s %6s %8s  %s\n", "id", "pipeline", "built-in ms", "best ms",
                "speed-up", "tried", "failed", "tuned s", "best schedule");
  o << "tuning database " << db_path << ": " << rows.size() << " pipelines\n" << line;
  for (const Summary& s : rows) {
    std::snprintf(line, sizeof line, "%-3lld %-22s %11.4f %11.4f %8s %6zu %6d %8.0f  %s\n", (long long)s.p.id,
                  s.p.name.substr(0, 22).c_str(), s.p.builtin_ms, s.best_ms, times(s.best_x).c_str(),
                  s.candidates.size(), s.failed, s.p.tuning_s, s.best_origin.substr(0, 60).c_str());
    o << line;
  }
  o << "\nbest speed-up over built-in by scheduler; Adams2019's best with Halide's weights and with retrained ones:\n";
  std::snprintf(line, sizeof line, "%-3s %-22s %10s %10s %10s %14s %10s %10s\n", "id", "pipeline", "built-in*", "Adams2019",
                "Li2018", "Mullapudi2016", "pretrained", "retrained");
  o << line;
  for (const Summary& s : rows) {
    auto by = [&](const char* k) {
      auto it = s.best_by_scheduler.find(k);
      return it == s.best_by_scheduler.end() ? std::string("-") : times(it->second);
    };
    std::snprintf(line, sizeof line, "%-3lld %-22s %10s %10s %10s %14s %10s %10s\n", (long long)s.p.id,
                  s.p.name.substr(0, 22).c_str(), by("built-in").c_str(), by("Adams2019").c_str(), by("Li2018").c_str(),
                  by("Mullapudi2016").c_str(), times(s.adams_pretrained).c_str(),
                  times(s.adams_retrained).c_str());
    o << line;
  }
  o << "(built-in*: the best point of the built-in scheduler's parameter space)\n";
  if (!svg_prefix.empty()) {
    write_file(svg_prefix + "_speedup.svg", speedup_svg(rows));
    write_file(svg_prefix + "_progress.svg", progress_svg(rows));
    o << "plots: " << svg_prefix << "_speedup.svg, " << svg_prefix << "_progress.svg\n";
  }
  return o.str();
}

}  // namespace hjit
