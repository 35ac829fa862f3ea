// The libraries build with hidden visibility; only the cuBLAS API, marked
// with this, is exported (a version script gives it the real symbol version).
#pragma once

#define VGPUSIM_BLAS_API extern "C" __attribute__((visibility("default")))
