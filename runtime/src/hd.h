// Marks the small shared helpers (storage conversions, per-row loss formulas, target lookup) as usable
// from host code and, under nvcc, from device code too, so the CPU reference and the CUDA kernels
// evaluate the same formulas from one source.
#pragma once

#if defined(__CUDACC__)
#define LMFUSE_HD __host__ __device__
#else
#define LMFUSE_HD
#endif
