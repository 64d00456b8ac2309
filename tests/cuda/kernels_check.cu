// The lean edge kernels on CUDA against the same kernels on the CPU, on the
// GPU, on random inputs laid out as the engine lays them out (pieces with
// padded strides, a y0 wider than its 5H columns): every output of every
// kernel, fp64 and fp32.  Each kernel is an op (edges/kernels/ops.h) run by
// its device's launch template: on CUDA cuda_launch (edges/launch/cuda.h,
// instantiated in edges/cuda/ops.cu), on the CPU cpu_range over all the op's
// items on one thread (edges/launch/cpu.h, instantiated in edges/cpu/ops.cpp).
// The CPU is the tested reference (the engine's LeanEdges tests hold it to
// the LibTorch composition, values and first and second derivatives, at
// 1e-13).  A GPU-only check: a stage of scripts/gpu_check.sh ("kernels"),
// built there or prebuilt here with nvcc.
// Prints one line per kernel and precision, then "kernels check: passed" or
// the failures; exit status 1 on any failure, 2 when there is no GPU.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "edges/kernels/ops.h"
#include "edges/launch/cpu.h"
#include "edges/launch/cuda.h"

namespace k = uma::edges::kernels;
namespace launch = uma::edges::launch;

namespace {

int failures = 0;

// An op over all its items on one CPU thread (the reference), and on the
// GPU's default stream.
template <typename Op>
void on_cpu(const Op& op) {
  launch::cpu_range(op, 0, op.cpu_items());
}
template <typename Op>
void on_gpu(const Op& op) {
  launch::cuda_launch(op, nullptr);
}

void cuda_ok(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "kernels check: %s: %s\n", what, cudaGetErrorString(err));
  std::exit(1);
}

// One host array and its device copy.
template <typename T>
struct Buffer {
  std::vector<T> host;
  T* device = nullptr;
  explicit Buffer(size_t n, std::mt19937& gen) : host(n) {
    std::uniform_real_distribution<double> u(-2, 2);
    for (auto& x : host) x = T(u(gen));
    cuda_ok(cudaMalloc(&device, n * sizeof(T)), "cudaMalloc");
    cuda_ok(cudaMemcpy(device, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  ~Buffer() { cudaFree(device); }
  std::vector<T> download() const {
    std::vector<T> out(host.size());
    cuda_ok(cudaMemcpy(out.data(), device, out.size() * sizeof(T), cudaMemcpyDeviceToHost),
            "download");
    return out;
  }
};

// Three pieces [E, 3|4|2, H] with `pad` unused channels after each row.
template <typename T>
struct Pieces {
  int64_t H, pad;
  Buffer<T> p0, p1, p2;
  Pieces(int64_t E, int64_t H_, int64_t pad_, std::mt19937& gen)
      : H(H_),
        pad(pad_),
        p0(E * 3 * (H_ + pad_), gen),
        p1(E * 4 * (H_ + pad_), gen),
        p2(E * 2 * (H_ + pad_), gen) {}
  template <typename U>
  k::Rows<U> rows(bool device) const {
    k::Rows<U> r;
    const Buffer<T>* b[3] = {&p0, &p1, &p2};
    const int64_t n[3] = {3, 4, 2};
    for (int i = 0; i < 3; ++i) {
      r.base[i] = device ? b[i]->device : const_cast<T*>(b[i]->host.data());
      r.row_stride[i] = H + pad;
      r.edge_stride[i] = n[i] * (H + pad);
    }
    return r;
  }
};

// max |gpu - cpu| / max |cpu| over the elements a kernel writes (the padding
// of pieces is compared too: neither launcher may write it).
template <typename T>
void compare(const char* kernel, const char* output, const std::vector<T>& cpu,
             const std::vector<T>& gpu, double tolerance) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    diff = std::fmax(diff, std::fabs(double(gpu[i]) - double(cpu[i])));
    scale = std::fmax(scale, std::fabs(double(cpu[i])));
  }
  const double rel = diff / (scale > 0 ? scale : 1);
  const bool ok = rel <= tolerance && std::isfinite(rel);
  std::printf("%-34s %-6s %-4s relative %.3e (bound %.0e) %s\n", kernel, output,
              sizeof(T) == 8 ? "fp64" : "fp32", rel, tolerance, ok ? "ok" : "FAILED");
  failures += !ok;
}

// An output's pieces on both sides, starting from the same contents (so that
// a launcher writing where it must not shows).
template <typename T>
struct PiecesPair {
  Pieces<T> cpu, gpu;
  PiecesPair(int64_t E, int64_t width, int64_t pad, std::mt19937& gen)
      : cpu(E, width, pad, gen), gpu(E, width, pad, gen) {
    gpu.p0.host = cpu.p0.host, gpu.p1.host = cpu.p1.host, gpu.p2.host = cpu.p2.host;
    for (auto* b : {&gpu.p0, &gpu.p1, &gpu.p2})
      cuda_ok(
          cudaMemcpy(b->device, b->host.data(), b->host.size() * sizeof(T), cudaMemcpyHostToDevice),
          "upload");
  }
  void compare_all(const char* kernel, double tolerance) const {
    compare(kernel, "out0", cpu.p0.host, gpu.p0.download(), tolerance);
    compare(kernel, "out1", cpu.p1.host, gpu.p1.download(), tolerance);
    compare(kernel, "out2", cpu.p2.host, gpu.p2.download(), tolerance);
  }
};

// Node indices in [0, N), both arrays on both sides; some edges are loops.
struct Endpoints {
  std::vector<int64_t> host;
  int64_t* device = nullptr;
  Endpoints(int64_t E, int64_t N, std::mt19937& gen) : host(E) {
    for (auto& n : host) n = int64_t(gen() % N);
    cuda_ok(cudaMalloc(&device, E * sizeof(int64_t)), "cudaMalloc");
    cuda_ok(cudaMemcpy(device, host.data(), E * sizeof(int64_t), cudaMemcpyHostToDevice), "upload");
  }
  ~Endpoints() { cudaFree(device); }
};

template <typename T>
void check(double tolerance) {
  const int64_t E = 1537, H = 96, pad = 5, y0_stride = 6 * H + 3;
  std::mt19937 gen(sizeof(T));
  Buffer<T> y0(E * y0_stride, gen), sig(E * 3 * H, gen);
  for (auto& s : sig.host) s = T(1 / (1 + std::exp(-double(s))));  // sigmoids lie in (0, 1)
  cuda_ok(
      cudaMemcpy(sig.device, sig.host.data(), sig.host.size() * sizeof(T), cudaMemcpyHostToDevice),
      "upload");
  Pieces<T> in(E, H, pad, gen), gq(E, H, pad, gen), adj(E, H, pad, gen);
  Buffer<T> a0(E * 5 * H, gen);
  // What every gate op reads, on the host or on the device.
  auto input = [&](bool device) {
    const T* y = device ? y0.device : y0.host.data();
    const T* s = device ? sig.device : sig.host.data();
    return k::GateInput<T>{y, y0_stride, in.template rows<const T>(device), s, H, E};
  };
  auto both = [&](auto&& cpu, auto&& gpu) {
    cpu();
    gpu();
    cuda_ok(cudaDeviceSynchronize(), "kernel");
  };

  {  // gate
    PiecesPair<T> q(E, H, pad, gen);
    both(
        [&] {
          on_cpu(k::GateOp<T>{input(false), q.cpu.template rows<T>(false)});
        },
        [&] {
          on_gpu(k::GateOp<T>{input(true), q.gpu.template rows<T>(true)});
        });
    q.compare_all("gate", tolerance);
  }
  {  // gate_grad
    Buffer<T> gy0(E * 5 * H, gen);
    Pieces<T> gy(E, H, pad, gen);
    std::vector<T> gy0_cpu = gy0.host;
    Pieces<T> gy_cpu(E, H, pad, gen);
    gy_cpu.p1.host = gy.p1.host, gy_cpu.p2.host = gy.p2.host;
    both(
        [&] {
          on_cpu(k::GateGradOp<T>{input(false), gq.template rows<const T>(false), gy0_cpu.data(),
                                  gy_cpu.template rows<T>(false)});
        },
        [&] {
          on_gpu(k::GateGradOp<T>{input(true), gq.template rows<const T>(true), gy0.device,
                                  gy.template rows<T>(true)});
        });
    compare("gate_grad", "gy0", gy0_cpu, gy0.download(), tolerance);
    compare("gate_grad", "gy1", gy_cpu.p1.host, gy.p1.download(), tolerance);
    compare("gate_grad", "gy2", gy_cpu.p2.host, gy.p2.download(), tolerance);
  }
  {  // gate_grad_grad
    Buffer<T> dy0(E * 5 * H, gen);
    Pieces<T> dg(E, H, pad, gen), dy(E, H, pad, gen);
    std::vector<T> dy0_cpu = dy0.host;
    Pieces<T> dg_cpu(E, H, pad, gen), dy_cpu(E, H, pad, gen);
    dg_cpu.p0.host = dg.p0.host, dg_cpu.p1.host = dg.p1.host, dg_cpu.p2.host = dg.p2.host;
    dy_cpu.p1.host = dy.p1.host, dy_cpu.p2.host = dy.p2.host;
    both(
        [&] {
          on_cpu(k::GateGradGradOp<T>{input(false), gq.template rows<const T>(false),
                                      a0.host.data(), adj.template rows<const T>(false),
                                      dg_cpu.template rows<T>(false), dy0_cpu.data(),
                                      dy_cpu.template rows<T>(false)});
        },
        [&] {
          on_gpu(k::GateGradGradOp<T>{input(true), gq.template rows<const T>(true), a0.device,
                                      adj.template rows<const T>(true), dg.template rows<T>(true),
                                      dy0.device, dy.template rows<T>(true)});
        });
    compare("gate_grad_grad", "dgq0", dg_cpu.p0.host, dg.p0.download(), tolerance);
    compare("gate_grad_grad", "dgq1", dg_cpu.p1.host, dg.p1.download(), tolerance);
    compare("gate_grad_grad", "dgq2", dg_cpu.p2.host, dg.p2.download(), tolerance);
    compare("gate_grad_grad", "dy0", dy0_cpu, dy0.download(), tolerance);
    compare("gate_grad_grad", "dy1", dy_cpu.p1.host, dy.p1.download(), tolerance);
    compare("gate_grad_grad", "dy2", dy_cpu.p2.host, dy.p2.download(), tolerance);
  }
}

// The edges' segments by an endpoint as the engine lays them out: order lists
// each node's edges in ascending order, node after node, offsets [N + 1];
// entries at or past `edges` are padding, skipped (here in node 3's segment
// and at the end).
struct Segments {
  std::vector<int64_t> order, offsets;
  int64_t *order_device = nullptr, *offsets_device = nullptr;
  Segments(const std::vector<int64_t>& endpoint, int64_t N) : offsets(N + 1, 0) {
    const int64_t E = int64_t(endpoint.size());
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t e = 0; e < E; ++e)
        if (endpoint[e] == n) order.push_back(e);
      if (n == 3 || n == N - 1) order.insert(order.end(), {E, E + 4});
      offsets[n + 1] = int64_t(order.size());
    }
    cuda_ok(cudaMalloc(&order_device, order.size() * sizeof(int64_t)), "cudaMalloc");
    cuda_ok(cudaMalloc(&offsets_device, offsets.size() * sizeof(int64_t)), "cudaMalloc");
    cuda_ok(cudaMemcpy(order_device, order.data(), order.size() * sizeof(int64_t),
                       cudaMemcpyHostToDevice),
            "upload");
    cuda_ok(cudaMemcpy(offsets_device, offsets.data(), offsets.size() * sizeof(int64_t),
                       cudaMemcpyHostToDevice),
            "upload");
  }
  ~Segments() {
    cudaFree(order_device);
    cudaFree(offsets_device);
  }
};

template <typename T>
void check_rotate_in(double tolerance) {
  const int64_t E = 1537, N = 211, C = 48, pad = 3;
  std::mt19937 gen(10 + sizeof(T));
  Buffer<T> D(E * 81, gen), dD(E * 81, gen), x(N * 9 * C, gen), dx(N * 9 * C, gen),
      radial(E * 12 * C, gen), dradial(E * 12 * C, gen);
  Endpoints src(E, N, gen), tgt(E, N, gen);
  tgt.host[7] = src.host[7];
  cuda_ok(cudaMemcpy(tgt.device, tgt.host.data(), E * sizeof(int64_t), cudaMemcpyHostToDevice),
          "upload");
  {
    PiecesPair<T> out(E, 2 * C, pad, gen);
    on_cpu(k::RotateInOp<T>{D.host.data(), x.host.data(), src.host.data(), tgt.host.data(),
                            radial.host.data(), out.cpu.template rows<T>(false), C, E});
    on_gpu(k::RotateInOp<T>{D.device, x.device, src.device, tgt.device, radial.device,
                            out.gpu.template rows<T>(true), C, E});
    cuda_ok(cudaDeviceSynchronize(), "kernel");
    out.compare_all("rotate_in", tolerance);
  }
  {
    PiecesPair<T> out(E, 2 * C, pad, gen);
    on_cpu(k::RotateInTangentOp<T>{D.host.data(), dD.host.data(), x.host.data(), dx.host.data(),
                                   src.host.data(), tgt.host.data(), radial.host.data(),
                                   dradial.host.data(), out.cpu.template rows<T>(false), C, E});
    on_gpu(k::RotateInTangentOp<T>{D.device, dD.device, x.device, dx.device, src.device, tgt.device,
                                   radial.device, dradial.device, out.gpu.template rows<T>(true), C,
                                   E});
    cuda_ok(cudaDeviceSynchronize(), "kernel");
    out.compare_all("rotate_in_tangent", tolerance);
  }
  // the backward: radial and D per edge (D's gradient accumulated, and not
  // wanted), x per node from the edges' segments by source and by target
  Pieces<T> g(E, 2 * C, pad, gen);
  for (bool want_D : {true, false}) {
    const std::string name = want_D ? "rotate_in_grad_edges" : "rotate_in_grad_edges/no_gD";
    Buffer<T> gD(E * 81, gen), gradial(E * 12 * C, gen);
    std::vector<T> gD_cpu = gD.host, gradial_cpu = gradial.host;
    // (no per-thread gx: gx_threads null, on both sides)
    on_cpu(k::RotateInGradEdgesOp<T>{D.host.data(), x.host.data(), src.host.data(), tgt.host.data(),
                                     radial.host.data(), g.template rows<const T>(false), C, E,
                                     want_D ? gD_cpu.data() : nullptr, gradial_cpu.data()});
    on_gpu(k::RotateInGradEdgesOp<T>{D.device, x.device, src.device, tgt.device, radial.device,
                                     g.template rows<const T>(true), C, E,
                                     want_D ? gD.device : nullptr, gradial.device});
    cuda_ok(cudaDeviceSynchronize(), "kernel");
    compare(name.c_str(), "gD", gD_cpu, gD.download(), tolerance);
    compare(name.c_str(), "gradial", gradial_cpu, gradial.download(), tolerance);
  }
  const Segments by_source(src.host, N), by_target(tgt.host, N);
  // The node passes' graph, on the host and on the device.
  const k::NodeWalk walk_cpu{by_source.order.data(),
                             by_source.offsets.data(),
                             by_target.order.data(),
                             by_target.offsets.data(),
                             E,
                             C,
                             N};
  const k::NodeWalk walk_gpu{by_source.order_device,
                             by_source.offsets_device,
                             by_target.order_device,
                             by_target.offsets_device,
                             E,
                             C,
                             N};
  {
    Buffer<T> gx(N * 9 * C, gen);
    std::vector<T> gx_cpu = gx.host;
    on_cpu(k::RotateInGradNodesOp<T>{walk_cpu, D.host.data(), radial.host.data(),
                                     g.template rows<const T>(false), gx_cpu.data()});
    on_gpu(k::RotateInGradNodesOp<T>{walk_gpu, D.device, radial.device,
                                     g.template rows<const T>(true), gx.device});
    cuda_ok(cudaDeviceSynchronize(), "kernel");
    compare("rotate_in_grad_nodes", "gx", gx_cpu, gx.download(), tolerance);
  }
  // the tangents of the backward (the double backward's)
  for (bool want_D : {true, false}) {
    const std::string name =
        want_D ? "rotate_in_grad_edges_tangent" : "rotate_in_grad_edges_tangent/no_gD";
    Buffer<T> gD(E * 81, gen), gradial(E * 12 * C, gen);
    std::vector<T> gD_cpu = gD.host, gradial_cpu = gradial.host;
    on_cpu(k::RotateInGradEdgesTangentOp<T>{
        D.host.data(), dD.host.data(), x.host.data(), dx.host.data(), src.host.data(),
        tgt.host.data(), radial.host.data(), dradial.host.data(), g.template rows<const T>(false),
        C, E, want_D ? gD_cpu.data() : nullptr, gradial_cpu.data()});
    on_gpu(k::RotateInGradEdgesTangentOp<T>{D.device, dD.device, x.device, dx.device, src.device,
                                            tgt.device, radial.device, dradial.device,
                                            g.template rows<const T>(true), C, E,
                                            want_D ? gD.device : nullptr, gradial.device});
    cuda_ok(cudaDeviceSynchronize(), "kernel");
    compare(name.c_str(), "gD", gD_cpu, gD.download(), tolerance);
    compare(name.c_str(), "gradial", gradial_cpu, gradial.download(), tolerance);
  }
  {
    Buffer<T> gx(N * 9 * C, gen);
    std::vector<T> gx_cpu = gx.host;
    on_cpu(k::RotateInGradNodesTangentOp<T>{walk_cpu, D.host.data(), dD.host.data(),
                                            radial.host.data(), dradial.host.data(),
                                            g.template rows<const T>(false), gx_cpu.data()});
    on_gpu(k::RotateInGradNodesTangentOp<T>{walk_gpu, D.device, dD.device, radial.device,
                                            dradial.device, g.template rows<const T>(true),
                                            gx.device});
    cuda_ok(cudaDeviceSynchronize(), "kernel");
    compare("rotate_in_grad_nodes_tangent", "gx", gx_cpu, gx.download(), tolerance);
  }
}

template <typename T>
void check_rotate_out(double tolerance) {
  const int64_t E = 1537, N = 211, C = 48, pad = 3;
  std::mt19937 gen(20 + sizeof(T));
  Buffer<T> D(E * 81, gen), envelope(E, gen), out_gpu(N * 9 * C, gen);  // accumulated into
  Pieces<T> y(E, C, pad, gen);
  Endpoints tgt(E, N, gen);
  const Segments by_target(tgt.host, N);
  for (int rows : {9, 3}) {
    std::vector<T> out_cpu = out_gpu.download();
    // the forward: no dD, denvelope, dy
    on_cpu(k::RotateOutNodesOp<T>{D.host.data(), nullptr, envelope.host.data(), nullptr,
                                  y.template rows<const T>(false), k::Rows<const T>(), rows,
                                  by_target.order.data(), by_target.offsets.data(), E, C, N,
                                  out_cpu.data()});
    on_gpu(k::RotateOutNodesOp<T>{D.device, nullptr, envelope.device, nullptr,
                                  y.template rows<const T>(true), k::Rows<const T>(), rows,
                                  by_target.order_device, by_target.offsets_device, E, C, N,
                                  out_gpu.device});
    cuda_ok(cudaDeviceSynchronize(), "kernel");
    compare(rows == 9 ? "rotate_out" : "rotate_out/rows3", "out", out_cpu, out_gpu.download(),
            tolerance);
  }
  // the backward: gy and the geometry's gradients, each alone and both
  Buffer<T> gout(N * 9 * C, gen);
  for (int rows : {9, 3})
    for (int want : {3, 1, 2}) {  // bit 0: gy, bit 1: gD and genvelope
      const std::string name = std::string("rotate_out_grad") + (rows == 3 ? "/rows3" : "") +
                               (want == 1   ? "/gy"
                                : want == 2 ? "/geometry"
                                            : "");
      PiecesPair<T> gy(E, C, pad, gen);
      Buffer<T> gD(E * 81, gen), genvelope(E, gen);
      std::vector<T> gD_cpu(E * 81, T(0)), genvelope_cpu = genvelope.host;
      cuda_ok(cudaMemset(gD.device, 0, E * 81 * sizeof(T)), "zero");
      const bool want_gy = want & 1, geometry = want & 2;
      k::Rows<T> gy_cpu = want_gy ? gy.cpu.template rows<T>(false) : k::Rows<T>();
      k::Rows<T> gy_gpu = want_gy ? gy.gpu.template rows<T>(true) : k::Rows<T>();
      on_cpu(k::RotateOutGradOp<T>{
          D.host.data(), envelope.host.data(), y.template rows<const T>(false), rows,
          tgt.host.data(), gout.host.data(), C, E, gy_cpu, geometry ? gD_cpu.data() : nullptr,
          geometry ? genvelope_cpu.data() : nullptr});
      on_gpu(k::RotateOutGradOp<T>{
          D.device, envelope.device, y.template rows<const T>(true), rows, tgt.device, gout.device,
          C, E, gy_gpu, geometry ? gD.device : nullptr, geometry ? genvelope.device : nullptr});
      cuda_ok(cudaDeviceSynchronize(), "kernel");
      gy.compare_all(name.c_str(), tolerance);
      compare(name.c_str(), "gD", gD_cpu, gD.download(), tolerance);
      compare(name.c_str(), "genv", genvelope_cpu, genvelope.download(), tolerance);
    }
  // the tangents along (dD, denvelope, dy)
  Buffer<T> dD(E * 81, gen), denvelope(E, gen);
  Pieces<T> dy(E, C, pad, gen);
  for (int rows : {9, 3}) {
    const std::string suffix = rows == 3 ? "/rows3" : "";
    std::vector<T> out_cpu = out_gpu.download();
    // (RotateOutNodesOp with dD, denvelope, dy: the forward's tangent)
    on_cpu(k::RotateOutNodesOp<T>{D.host.data(), dD.host.data(), envelope.host.data(),
                                  denvelope.host.data(), y.template rows<const T>(false),
                                  dy.template rows<const T>(false), rows, by_target.order.data(),
                                  by_target.offsets.data(), E, C, N, out_cpu.data()});
    on_gpu(k::RotateOutNodesOp<T>{D.device, dD.device, envelope.device, denvelope.device,
                                  y.template rows<const T>(true), dy.template rows<const T>(true),
                                  rows, by_target.order_device, by_target.offsets_device, E, C, N,
                                  out_gpu.device});
    cuda_ok(cudaDeviceSynchronize(), "kernel");
    compare(("rotate_out_tangent" + suffix).c_str(), "out", out_cpu, out_gpu.download(), tolerance);
    for (bool geometry : {true, false}) {
      const std::string name = "rotate_out_grad_tangent" + suffix + (geometry ? "" : "/gy");
      PiecesPair<T> gy2(E, C, pad, gen);
      Buffer<T> gD2(E * 81, gen), genvelope2(E, gen);
      std::vector<T> gD2_cpu(E * 81, T(0)), genvelope2_cpu = genvelope2.host;
      cuda_ok(cudaMemset(gD2.device, 0, E * 81 * sizeof(T)), "zero");
      on_cpu(k::RotateOutGradTangentOp<T>{
          D.host.data(), dD.host.data(), envelope.host.data(), denvelope.host.data(),
          y.template rows<const T>(false), dy.template rows<const T>(false), rows, tgt.host.data(),
          gout.host.data(), C, E, gy2.cpu.template rows<T>(false),
          geometry ? gD2_cpu.data() : nullptr, geometry ? genvelope2_cpu.data() : nullptr});
      on_gpu(k::RotateOutGradTangentOp<T>{
          D.device, dD.device, envelope.device, denvelope.device, y.template rows<const T>(true),
          dy.template rows<const T>(true), rows, tgt.device, gout.device, C, E,
          gy2.gpu.template rows<T>(true), geometry ? gD2.device : nullptr,
          geometry ? genvelope2.device : nullptr});
      cuda_ok(cudaDeviceSynchronize(), "kernel");
      gy2.compare_all(name.c_str(), tolerance);
      compare(name.c_str(), "gD", gD2_cpu, gD2.download(), tolerance);
      compare(name.c_str(), "genv", genvelope2_cpu, genvelope2.download(), tolerance);
    }
  }
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "kernels check: no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop;
  cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("kernels check on %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  // The same operations in the same order on both sides; the GPU may fuse a
  // multiply and an add where the CPU rounds twice.
  check<double>(1e-13);
  check<float>(1e-5);
  check_rotate_in<double>(1e-13);
  check_rotate_in<float>(1e-5);
  check_rotate_out<double>(1e-13);
  check_rotate_out<float>(1e-5);
  if (failures) {
    std::printf("kernels check: FAILED (%d outputs)\n", failures);
    return 1;
  }
  std::printf("kernels check: passed\n");
  return 0;
}
