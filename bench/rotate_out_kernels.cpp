// The rotate-out family's backward (RotateOutGradOp) and double backward
// (RotateOutGradTangentOp) alone on the CPU, through the CPU's launch
// template, over 9 rows, with and without the geometry's gradients: best of
// N calls, one thread.  A benchmark, not a test.  Built against one tree's
// sources, so that two commits compare side by side (doc/benchmarks.md):
//
//   g++ -std=c++20 -O3 -fopenmp -fno-math-errno -I TREE/src TREE/src/edges/cpu/ops.cpp
//       bench/rotate_out_kernels.cpp -o rotate_out_kernels   (one line)
//   ./rotate_out_kernels [calls]
//
// The flags are CMakeLists.txt's for src/edges/cpu/ops.cpp.  A checksum of the
// outputs follows each time: equal checksums, equal bits.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "edges/kernels/ops.h"
#include "edges/launch/cpu.h"

namespace {

using uma::edges::kernels::Rows;

constexpr int64_t kNodes = 500, kEdges = 40000, kChannels = 128;
constexpr int kRows = 9;
// The three pieces of an edge tensor: rows 0..2, 3..6, 7..8.
constexpr int kPieceRows[3] = {3, 4, 2};

template <typename T>
struct Pieces {
  std::vector<T> piece[3];
  Rows<T> rows() {
    Rows<T> r;
    for (int p = 0; p < 3; ++p) {
      r.base[p] = piece[p].data();
      r.edge_stride[p] = kPieceRows[p] * kChannels;
      r.row_stride[p] = kChannels;
    }
    return r;
  }
  Rows<const T> const_rows() {
    Rows<const T> r;
    const Rows<T> w = rows();
    for (int p = 0; p < 3; ++p) {
      r.base[p] = w.base[p];
      r.edge_stride[p] = w.edge_stride[p];
      r.row_stride[p] = w.row_stride[p];
    }
    return r;
  }
};

template <typename T>
class Inputs {
 public:
  Inputs() : random_(1) {
    for (auto* v : {&D, &dD}) *v = filled(kEdges * 81);
    for (auto* v : {&envelope, &denvelope}) *v = filled(kEdges);
    gout = filled(kNodes * 9 * kChannels);
    for (int p = 0; p < 3; ++p) {
      y.piece[p] = filled(kEdges * kPieceRows[p] * kChannels);
      dy.piece[p] = filled(kEdges * kPieceRows[p] * kChannels);
      gy.piece[p].assign(kEdges * kPieceRows[p] * kChannels, T(0));
    }
    gD.assign(kEdges * 81, T(0));
    genvelope.assign(kEdges, T(0));
    tgt.resize(kEdges);
    for (int64_t e = 0; e < kEdges; ++e) tgt[e] = e * kNodes / kEdges;  // sorted by target
  }

  double checksum() const {
    double sum = 0;
    for (T v : gD) sum += v;
    for (const auto& p : gy.piece)
      for (T v : p) sum += v;
    return sum;
  }

  std::vector<T> D, dD, envelope, denvelope, gout, gD, genvelope;
  std::vector<int64_t> tgt;
  Pieces<T> y, dy, gy;

 private:
  std::vector<T> filled(int64_t n) {
    std::uniform_real_distribution<double> uniform(-1, 1);
    std::vector<T> v(n);
    for (T& x : v) x = T(uniform(random_));
    return v;
  }
  std::mt19937 random_;
};

template <typename Call>
double best_ms(int calls, Call call) {
  double best = 1e300;
  for (int i = 0; i < calls; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count());
  }
  return best;
}

template <typename T>
void run(const char* type, int calls) {
  namespace k = uma::edges::kernels;
  Inputs<T> in;
  const Rows<const T> y = in.y.const_rows(), dy = in.dy.const_rows();
  const Rows<T> gy = in.gy.rows(), no_gy;
  struct Case {
    const char* name;
    bool gy, geometry, tangent;
  };
  for (const Case c : {Case{"grad, gy and geometry", true, true, false},
                       Case{"grad, geometry only", false, true, false},
                       Case{"grad, gy only", true, false, false},
                       Case{"grad_tangent, with geometry", true, true, true},
                       Case{"grad_tangent, gy2 only", true, false, true}}) {
    T* gD = c.geometry ? in.gD.data() : nullptr;
    T* genvelope = c.geometry ? in.genvelope.data() : nullptr;
    const double ms = best_ms(calls, [&] {
      if (c.tangent)
        uma::edges::launch::cpu_range(
            k::RotateOutGradTangentOp<T>{in.D.data(), in.dD.data(), in.envelope.data(),
                                         in.denvelope.data(), y, dy, kRows, in.tgt.data(),
                                         in.gout.data(), kChannels, kEdges, gy, gD, genvelope},
            0, kEdges);
      else
        uma::edges::launch::cpu_range(
            k::RotateOutGradOp<T>{in.D.data(), in.envelope.data(), y, kRows, in.tgt.data(),
                                  in.gout.data(), kChannels, kEdges, c.gy ? gy : no_gy, gD,
                                  genvelope},
            0, kEdges);
    });
    std::printf("%s  %-28s %8.2f ms  checksum %.15e\n", type, c.name, ms, in.checksum());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 7;
  std::printf("rotate_out's backward, %lld edges x %lld channels, %d rows, best of %d calls\n",
              static_cast<long long>(kEdges), static_cast<long long>(kChannels), kRows, calls);
  run<float>("fp32", calls);
  run<double>("fp64", calls);
  return 0;
}
