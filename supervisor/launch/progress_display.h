// ProgressDisplay: the launcher's live view of a run. On a terminal it keeps
// a small block at the bottom of the screen (a header with the phase and the
// elapsed time, then one line per site: clock range over the site's workers,
// mean loss, latest test accuracy, examples/s) and redraws it in place with
// ANSI cursor movement; messages scroll above it. Otherwise (a pipe, a file,
// or forced plain) it prints one plain line per site every few seconds.
//
// Not thread-safe: used on the launcher's loop thread. Writes to the FILE*s
// it is given; it does not own them.
#ifndef GEOPS_SUPERVISOR_LAUNCH_PROGRESS_DISPLAY_H_
#define GEOPS_SUPERVISOR_LAUNCH_PROGRESS_DISPLAY_H_

#include <cstdio>
#include <string>
#include <vector>

#include "supervisor/launch/launch_stats.h"

namespace geops::supervisor {

struct ProgressDisplayOptions {
  bool live = false;                    // redraw a block in place (a terminal)
  double plain_interval_seconds = 5.0;  // between plain status lines
  FILE* out = stdout;                   // progress and messages
  FILE* err = stderr;                   // warnings and errors
};

class ProgressDisplay {
 public:
  ProgressDisplay(std::string title, ProgressDisplayOptions options);

  // Shows the state at launcher time `t` (seconds). Call about every 0.5 s;
  // in plain mode only every plain_interval_seconds prints anything.
  // `phase` is a word such as "starting shards", "training", "stopping".
  void Update(double t, const std::string& phase, const std::vector<SiteProgress>& sites);
  // Prints one line above the live block (or plainly), on out or err.
  void Message(const std::string& line, bool error = false);
  // Leaves the last block on screen; later output goes below it.
  void Finish();

  // One site's line, e.g. "us-east-1  clock 120-135/1000  loss 0.4123
  // acc 0.8412  1234 ex/s  2 running". Exposed for tests.
  static std::string SiteLine(const SiteProgress& site, size_t name_width);
  // "12.3s" below a minute, "4m05s" below an hour, "1h02m03s" above.
  static std::string Elapsed(double seconds);

 private:
  void Erase();
  void Draw();
  int Columns() const;

  std::string title_;
  ProgressDisplayOptions options_;
  std::vector<std::string> block_;  // the lines currently drawn (live mode)
  int drawn_lines_ = 0;             // lines of block_ on screen
  double last_plain_t_ = -1e9;
};

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_LAUNCH_PROGRESS_DISPLAY_H_
