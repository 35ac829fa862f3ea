// A simulated library kernel takes the time its duration model gives for the
// operation, unless its caller declared that kernel's time. The layered
// trainer scales every byte size down, so the shapes it passes stand for
// buffers, not for the layer's arithmetic; it declares the layer's time (the
// same it declares for its own kernels) just before each call. Per thread:
// the declaration applies to the next kernel this library launches from the
// declaring thread, and is then spent.
#pragma once

namespace vgpusim_libs {

void declare_next_kernel_ns(double ns);

// The declared time of the kernel about to launch, 0 when none was declared;
// clears the declaration.
double take_declared_kernel_ns();

}  // namespace vgpusim_libs
