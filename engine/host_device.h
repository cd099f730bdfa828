// TPSP_HOST_DEVICE marks a function that host code and CUDA kernels both call (one definition for
// both: bf16 rounding, the Philox generator, the dropout index); it is empty outside nvcc.
#pragma once

#if defined(__CUDACC__)
#define TPSP_HOST_DEVICE __host__ __device__
#else
#define TPSP_HOST_DEVICE
#endif
