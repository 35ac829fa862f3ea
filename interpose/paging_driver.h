// The driver calls the pager makes, bound to the real driver; nullptr when
// the driver lacks one of them (then paging stays off).
#pragma once

#include "vmm/driver_ops.h"

namespace vgpumem::interpose {

const vmm::DriverOps* paging_driver_ops();

}  // namespace vgpumem::interpose
