// The lean edge kernels on CUDA timed one by one, fp32, at the size of
// the GPU check's Cu 1,000 evaluation with UMA-S's widths (1,000 atoms, 78,000
// edges found in 81,916 slots, C = H = 128), each against what its bytes would
// take at the speed of a device-to-device copy measured in the same run.  The
// per-node kernels (rotate-out, rotate-in's gradient for x) run twice, over
// the same edges with two sets of segments: the engine's (the padding slots
// left out) and segments that give the last atom every padding slot, as the
// graph lays the padding out (src/graph/radius_graph.h).  Each kernel is an
// op (edges/kernels/ops.h) launched by the CUDA launch template
// (edges/launch/cuda.h, instantiated in edges/cuda/ops.cu).
// A benchmark, not a check: the GPU check's profile stage prints its table.
// usage: kernel_times [REPEATS]; exit status 2 when there is no GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "edges/kernels/ops.h"
#include "edges/launch/cuda.h"

namespace k = uma::edges::kernels;
using uma::edges::kernels::Rows;
using uma::edges::launch::cuda_launch;

namespace {

constexpr int64_t kAtoms = 1000, kDegree = 78, kEdges = kAtoms * kDegree;
constexpr int64_t kSlots = kEdges + kEdges / 20 + 16;  // the graph's capacity headroom
constexpr int64_t C = 128, H = 128;

void cuda_ok(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "kernel_times: %s: %s\n", what, cudaGetErrorString(err));
  std::exit(1);
}

// Values in [lo, lo + span): finite, away from denormals.
__global__ void fill_kernel(float* p, int64_t n, float lo, float span) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = lo + span * (0.5f + 0.5f * __sinf(0.37f * float(i % 9973)));
}

// Device memory freed with the run.
std::vector<void*> allocations;

float* floats(int64_t n, float lo = -1, float span = 2) {
  void* p = nullptr;
  cuda_ok(cudaMalloc(&p, n * sizeof(float)), "cudaMalloc");
  allocations.push_back(p);
  fill_kernel<<<1024, 256>>>(static_cast<float*>(p), n, lo, span);
  cuda_ok(cudaGetLastError(), "fill");
  return static_cast<float*>(p);
}

const int64_t* longs(const std::vector<int64_t>& host) {
  void* p = nullptr;
  cuda_ok(cudaMalloc(&p, host.size() * sizeof(int64_t)), "cudaMalloc");
  allocations.push_back(p);
  cuda_ok(cudaMemcpy(p, host.data(), host.size() * sizeof(int64_t), cudaMemcpyHostToDevice),
          "upload");
  return static_cast<const int64_t*>(p);
}

// Pieces [E, 3|4|2, width], contiguous.
template <typename U>
Rows<U> pieces(int64_t width) {
  Rows<U> r;
  const int64_t rows[3] = {3, 4, 2};
  for (int i = 0; i < 3; ++i) {
    r.base[i] = floats(kSlots * rows[i] * width);
    r.row_stride[i] = width;
    r.edge_stride[i] = rows[i] * width;
  }
  return r;
}

template <typename U>
Rows<const U> as_const(const Rows<U>& r) {
  Rows<const U> c;
  for (int i = 0; i < 3; ++i) {
    c.base[i] = r.base[i];
    c.row_stride[i] = r.row_stride[i];
    c.edge_stride[i] = r.edge_stride[i];
  }
  return c;
}

// Segments by node (CSR) of `node` over the slots; with `padding`, the slots
// past the edges found join the last atom's segment, else none.
struct Segments {
  const int64_t *order, *offsets;
};

Segments segments(const std::vector<int64_t>& node, bool padding) {
  std::vector<int64_t> order, offsets(kAtoms + 1, 0);
  const int64_t used = padding ? kSlots : kEdges;
  for (int64_t e = 0; e < used; ++e) ++offsets[node[e] + 1];
  for (int64_t n = 0; n < kAtoms; ++n) offsets[n + 1] += offsets[n];
  order.resize(used);
  std::vector<int64_t> next(offsets.begin(), offsets.end() - 1);
  for (int64_t e = 0; e < used; ++e) order[next[node[e]]++] = e;
  return {longs(order), longs(offsets)};
}

// Milliseconds per call of `launch`, the mean of `repeats` after two unmeasured calls.
double time_ms(const std::function<void()>& launch, int repeats) {
  launch();
  launch();
  cuda_ok(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, stop;
  cuda_ok(cudaEventCreate(&start), "event");
  cuda_ok(cudaEventCreate(&stop), "event");
  cuda_ok(cudaEventRecord(start), "record");
  for (int i = 0; i < repeats; ++i) launch();
  cuda_ok(cudaEventRecord(stop), "record");
  cuda_ok(cudaEventSynchronize(stop), "kernels");
  cuda_ok(cudaGetLastError(), "kernels");
  float ms = 0;
  cuda_ok(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / repeats;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "kernel_times: no CUDA device\n");
    return 2;
  }
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  cudaDeviceProp prop;
  cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");

  // The graph: each atom the target of kDegree edges (in target order, as the
  // graph builds them), sources spread over the atoms; the padding slots
  // point at the last atom.
  std::vector<int64_t> src(kSlots, kAtoms - 1), tgt(kSlots, kAtoms - 1);
  for (int64_t e = 0; e < kEdges; ++e) {
    tgt[e] = e / kDegree;
    src[e] = (e * 7919 + 13) % kAtoms;
  }
  const int64_t *src_d = longs(src), *tgt_d = longs(tgt);
  const Segments by_src = segments(src, false), by_tgt = segments(tgt, false);
  const Segments by_src_padded = segments(src, true), by_tgt_padded = segments(tgt, true);

  const float* D = floats(kSlots * 81);
  const float* envelope = floats(kSlots, 0, 1);
  const float* x = floats(kAtoms * 9 * C);
  const float* radial = floats(kSlots * 12 * C);
  const auto msg = pieces<float>(2 * C), g = pieces<float>(2 * C);  // rotate-in's out, its gradient
  const auto y = pieces<float>(C), gy = pieces<float>(C);           // rotate-out's input, gradient
  float* gradial = floats(kSlots * 12 * C);
  float* gD = floats(kSlots * 81);
  float* genvelope = floats(kSlots);
  float* node_out = floats(kAtoms * 9 * C);
  const float* gout = floats(kAtoms * 9 * C);
  const int64_t y0_stride = 5 * H;
  const float* y0 = floats(kSlots * y0_stride);
  const float* sig = floats(kSlots * 3 * H, 0.05f, 0.9f);
  const auto gate_in = pieces<float>(H), q = pieces<float>(H), gq = pieces<float>(H),
             gate_gy = pieces<float>(H);
  float* gy0 = floats(kSlots * 5 * H);
  const k::GateInput<float> gate_input{y0, y0_stride, as_const(gate_in), sig, H, kSlots};

  // The copy that sets the bound: 512 MB device to device.
  const int64_t copy_floats = int64_t(1) << 27;
  float *copy_from = floats(copy_floats), *copy_to = floats(copy_floats);
  const double copy_ms = time_ms(
      [&] {
        cuda_ok(cudaMemcpyAsync(copy_to, copy_from, copy_floats * sizeof(float),
                                cudaMemcpyDeviceToDevice),
                "copy");
      },
      repeats);
  const double copy_gb_s = 2.0 * copy_floats * sizeof(float) / copy_ms / 1e6;  // read + write
  std::printf("kernel_times on %s: %lld atoms, %lld edges in %lld slots, C = H = %lld, fp32\n",
              prop.name, (long long)kAtoms, (long long)kEdges, (long long)kSlots, (long long)C);
  std::printf("device-to-device copy: %.1f GB/s (read + write), the bound below\n", copy_gb_s);
  std::printf("%-44s %9s %9s %9s %8s\n", "kernel", "ms", "MB moved", "bound ms", "x bound");

  const double S = kSlots, F = sizeof(float);
  auto report = [&](const char* name, double megabytes, const std::function<void()>& launch) {
    const double ms = time_ms(launch, repeats), bound = megabytes / copy_gb_s;  // MB / (GB/s) = ms
    std::printf("%-44s %9.3f %9.1f %9.3f %8.1f\n", name, ms, megabytes, bound, ms / bound);
  };
  // Bytes that must cross memory once: each kernel's inputs read and outputs written (an
  // accumulated output read and written; the gate reads y0's three M rows, its logits come
  // in as sig).
  const double d_mb = S * 81 * F / 1e6, radial_mb = S * 12 * C * F / 1e6,
               msg_mb = S * 18 * C * F / 1e6, y_mb = S * 9 * C * F / 1e6,
               node_mb = kAtoms * 9 * C * F / 1e6, gate_row_mb = S * H * F / 1e6;

  report("rotate_in", d_mb + radial_mb + node_mb + msg_mb, [&] {
    cuda_launch(k::RotateInOp<float>{D, x, src_d, tgt_d, radial, msg, C, kSlots}, nullptr);
  });
  report("rotate_in_grad_edges (radial, D)", 3 * d_mb + 2 * radial_mb + msg_mb + node_mb, [&] {
    cuda_launch(k::RotateInGradEdgesOp<float>{D, x, src_d, tgt_d, radial, as_const(g), C, kSlots,
                                              gD, gradial},
                nullptr);
  });
  for (bool padded : {false, true}) {
    const Segments& s = padded ? by_src_padded : by_src;
    const Segments& t = padded ? by_tgt_padded : by_tgt;
    report(padded ? "rotate_in_grad_nodes (x), padding segmented" : "rotate_in_grad_nodes (x)",
           d_mb + radial_mb + msg_mb + 2 * node_mb, [&] {
             const k::NodeWalk walk{s.order, s.offsets, t.order, t.offsets, kSlots, C, kAtoms};
             cuda_launch(k::RotateInGradNodesOp<float>{walk, D, radial, as_const(g), node_out},
                         nullptr);
           });
  }
  report("gate", gate_row_mb * (3 + 6 + 3 + 9), [&] {
    cuda_launch(k::GateOp<float>{gate_input, q}, nullptr);
  });
  report("gate_grad", gate_row_mb * (3 + 6 + 3 + 9 + 5 + 6), [&] {
    cuda_launch(k::GateGradOp<float>{gate_input, as_const(gq), gy0, gate_gy}, nullptr);
  });
  for (bool padded : {false, true}) {
    const Segments& t = padded ? by_tgt_padded : by_tgt;
    report(padded ? "rotate_out, padding segmented" : "rotate_out", d_mb + y_mb + 2 * node_mb, [&] {
      cuda_launch(k::RotateOutNodesOp<float>{D, nullptr, envelope, nullptr, as_const(y),
                                             Rows<const float>(), 9, t.order, t.offsets, kSlots, C,
                                             kAtoms, node_out},
                  nullptr);
    });
  }
  report("rotate_out_grad (y, D, envelope)", 2 * d_mb + 2 * y_mb + node_mb, [&] {
    cuda_launch(k::RotateOutGradOp<float>{D, envelope, as_const(y), 9, tgt_d, gout, C, kSlots, gy,
                                          gD, genvelope},
                nullptr);
  });
  for (void* p : allocations) cudaFree(p);
  return 0;
}
