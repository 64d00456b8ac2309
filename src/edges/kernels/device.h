// Marks for the lean kernels' bodies: the per-element work written once,
// compiled for the host (inlined into the ops' vector loops on the CPU) and
// for CUDA (called by one thread per element), edges/kernels/*_ops.h.
#pragma once

#if defined(__CUDACC__)
#define UMA_BODY __host__ __device__ __forceinline__
#else
#define UMA_BODY inline __attribute__((always_inline))
#endif
// A lambda that an op passes to with_block_size / with_degree (layout.h):
// inlined on the host too, so that a vector-width clone of the CPU's launch
// template (edges/launch/cpu_range.h's UMA_VECTOR_CLONES) runs its loop at
// the clone's width, not at the default one.
#if defined(__CUDACC__)
#define UMA_INLINE_LAMBDA
#else
#define UMA_INLINE_LAMBDA __attribute__((always_inline))
#endif
// Loops over a row's fixed rows, unrolled (so that their pointers stay in
// registers on the device); nothing in nvcc's host pass, which runs no body.
#if defined(__CUDA_ARCH__)
#define UMA_UNROLL _Pragma("unroll")
#elif defined(__CUDACC__)
#define UMA_UNROLL
#else
#define UMA_UNROLL _Pragma("GCC unroll 16")
#endif
