// The shim's side of logging: the process logger (common/log.h) set up from
// the configuration.
#pragma once

#include "common/format_bytes.h"
#include "common/log.h"
#include "shim/config.h"

namespace vgpumem {

inline void init_logging(const Config& config) { init_logging(config.log_level, config.log_file); }

}  // namespace vgpumem
