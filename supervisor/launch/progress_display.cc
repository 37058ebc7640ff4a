#include "supervisor/launch/progress_display.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace geops::supervisor {
namespace {

std::string Format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

}  // namespace

ProgressDisplay::ProgressDisplay(std::string title, ProgressDisplayOptions options)
    : title_(std::move(title)), options_(options) {}

std::string ProgressDisplay::Elapsed(double seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 60) return Format("%.1fs", seconds);
  long s = static_cast<long>(seconds);
  char buf[64];
  if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%ldh%02ldm%02lds", s / 3600, (s / 60) % 60, s % 60);
  }
  return buf;
}

std::string ProgressDisplay::SiteLine(const SiteProgress& site, size_t name_width) {
  std::string line = site.name;
  if (line.size() < name_width) line.append(name_width - line.size(), ' ');
  std::string clock = site.min_clock == site.max_clock
                          ? std::to_string(site.max_clock)
                          : std::to_string(site.min_clock) + "-" + std::to_string(site.max_clock);
  line += "  clock " + clock + "/" + std::to_string(site.clocks);
  line += "  loss " + (site.mean_loss ? Format("%.4f", *site.mean_loss) : std::string("-"));
  if (site.test_accuracy) line += "  acc " + Format("%.4f", *site.test_accuracy);
  line += "  " + Format("%.0f", site.examples_per_sec) + " ex/s";
  int running = site.workers - site.workers_done - site.workers_down;
  if (running > 0 && site.workers_final_read > 0) {
    line += "  " + std::to_string(site.workers_final_read) + " waiting for the final model (every site's drain)";
    running -= site.workers_final_read;
  }
  if (running > 0) line += "  " + std::to_string(running) + " running";
  if (site.workers_down > 0) line += "  " + std::to_string(site.workers_down) + " down";
  if (running <= 0 && site.workers_down == 0) line += "  done";
  return line;
}

void ProgressDisplay::Update(double t, const std::string& phase, const std::vector<SiteProgress>& sites) {
  size_t width = 0;
  for (const SiteProgress& s : sites) width = std::max(width, s.name.size());
  if (options_.live) {
    block_.clear();
    block_.push_back(title_ + " - " + phase + " - " + Elapsed(t));
    for (const SiteProgress& s : sites) block_.push_back("  " + SiteLine(s, width));
    Erase();
    Draw();
    return;
  }
  if (t - last_plain_t_ < options_.plain_interval_seconds) return;
  last_plain_t_ = t;
  std::string stamp = "[" + Elapsed(t) + "] ";
  if (phase != "training") {
    std::fprintf(options_.out, "%s%s\n", stamp.c_str(), phase.c_str());
  } else {
    for (const SiteProgress& s : sites) std::fprintf(options_.out, "%s%s\n", stamp.c_str(), SiteLine(s, width).c_str());
  }
  std::fflush(options_.out);
}

void ProgressDisplay::Message(const std::string& line, bool error) {
  Erase();
  FILE* f = error ? options_.err : options_.out;
  std::fprintf(f, "%s\n", line.c_str());
  std::fflush(f);
  Draw();
}

void ProgressDisplay::Finish() {
  // The block stays where it is; forget it so nothing erases it later.
  block_.clear();
  drawn_lines_ = 0;
}

void ProgressDisplay::Erase() {
  if (!options_.live || drawn_lines_ == 0) return;
  // Up to the block's first line, then clear to the end of the screen.
  std::fprintf(options_.out, "\x1b[%dA\r\x1b[J", drawn_lines_);
  std::fflush(options_.out);
  drawn_lines_ = 0;
}

void ProgressDisplay::Draw() {
  if (!options_.live || block_.empty()) return;
  size_t cols = static_cast<size_t>(std::max(20, Columns() - 1));
  for (const std::string& l : block_) {
    // Longer lines would wrap and break the count of lines to move up over.
    std::string shown = l.size() > cols ? l.substr(0, cols) : l;
    std::fprintf(options_.out, "\r\x1b[2K%s\n", shown.c_str());
  }
  drawn_lines_ = static_cast<int>(block_.size());
  std::fflush(options_.out);
}

int ProgressDisplay::Columns() const {
  struct winsize ws {};
  if (ioctl(fileno(options_.out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

}  // namespace geops::supervisor
