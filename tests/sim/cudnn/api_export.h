// The library builds with hidden visibility; only the cuDNN API, marked with
// this, is exported (a version script gives it the real symbol version,
// cudnnCreate@@libcudnn.so.9).
#pragma once

#define VGPUSIM_CUDNN_API extern "C" __attribute__((visibility("default")))
