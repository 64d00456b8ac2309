// First derivatives through collectives, with every collective run by the
// caller's thread.
//
// A process's share of a decomposed system calls collectives in its forward
// pass (the halo exchange of node features, sums over processes), and their
// gradients are collectives too.  Inside one autograd pass those gradients
// would run wherever LibTorch schedules the node: on a GPU, on the device's
// autograd worker thread, which may make no MPI call when MPI was initialised
// at thread level SINGLE (as LAMMPS does).  So the forward pass cuts the
// graph at each collective: its result becomes a new leaf.  grad() then
// differentiates stage by stage, from the last cut back to the first, and
// calls each collective's backward itself, on the calling thread, between
// two autograd passes.  Tensors that several stages read (the edge frame)
// are cut with an identity backward, so that each part of the graph is
// traversed exactly once.
#pragma once

#include <functional>
#include <vector>

#include <torch/torch.h>

namespace uma {

class StagedBackward {
 public:
  using Map = std::function<torch::Tensor(const torch::Tensor&)>;

  // A new leaf holding forward(input) (computed without autograd); in grad()
  // the gradient that reaches it becomes backward(gradient) at `input`.
  // forward and backward may be collectives: every process must make the same
  // cuts in the same order, and grad() calls every backward, in reverse order,
  // on every process (with zeros where no gradient arrived).
  torch::Tensor cut(const torch::Tensor& input, const Map& forward, Map backward);
  // New leaves with the inputs' values; their gradients are handed on
  // unchanged, in one autograd pass (the inputs may share a graph).
  std::vector<torch::Tensor> share(const std::vector<torch::Tensor>& inputs);

  // d output / d inputs for a scalar output (first derivatives; the graph is
  // freed), then forgets the cuts.  An input the output does not depend on
  // gets zeros.
  std::vector<torch::Tensor> grad(const torch::Tensor& output,
                                  const std::vector<torch::Tensor>& inputs);

  // Forgets the cuts (an evaluation that failed half-way).
  void clear() {
    cuts_.clear();
    leaves_.clear();
  }
  size_t size() const { return cuts_.size(); }

 private:
  struct Cut {
    std::vector<torch::Tensor> inputs;
    size_t first_leaf = 0;  // its leaves: leaves_[first_leaf, first_leaf + inputs.size())
    Map backward;           // one input; empty: identity, any number
  };
  std::vector<Cut> cuts_;
  std::vector<torch::Tensor> leaves_;
};

}  // namespace uma
