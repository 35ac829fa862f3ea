// Pictures drawn by the Python scripts: the demo's (the simulated timelines
// of two runs stacked on one time axis, scripts/plot_timeline.py) and a
// trace's (`vgpumem report --png`, scripts/plot_trace.py). Plotting is a
// nicety: when Python, matplotlib or the script is missing, the caller says
// how to draw the picture; the demo goes on without it.
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

// A vgpumem trace (VGPUMEM_TRACE) drawn by scripts/plot_trace.py into `out`:
// device memory against the cap, bytes on the host, launches, over the run.
PlotOutcome draw_trace(const std::string& trace, const std::string& out, const std::string& log);

}  // namespace vgpumem::cli
