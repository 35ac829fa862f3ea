#include "declared_duration.h"

namespace vgpusim_libs {
namespace {

// Each library links its own copy of this file (hidden), so each has its own
// declaration per thread.
thread_local double t_declared_ns = 0.0;

}  // namespace

void declare_next_kernel_ns(double ns) { t_declared_ns = ns > 0.0 ? ns : 0.0; }

double take_declared_kernel_ns() {
  const double ns = t_declared_ns;
  t_declared_ns = 0.0;
  return ns;
}

}  // namespace vgpusim_libs
