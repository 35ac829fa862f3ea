// The demo's picture: the simulated timelines of two runs stacked on one time
// axis by scripts/plot_timeline.py. Plotting is a nicety: when Python,
// matplotlib or the script is missing, the demo says how to draw the picture
// and goes on; it never fails for it.
#pragma once

#include <string>
#include <vector>

namespace vgpumem::cli {

struct PlotRequest {
  std::vector<std::string> timelines, labels, traces;  // one each per run (traces give the cap)
  std::string title;
  std::string out;  // the PNG
  std::string log;  // the script's output goes here
};

struct PlotOutcome {
  bool drawn = false;
  std::string command;  // the command that draws it, quoted for a shell
  std::string why_not;  // when not drawn
};

PlotOutcome draw_timelines(const PlotRequest& request);

}  // namespace vgpumem::cli
