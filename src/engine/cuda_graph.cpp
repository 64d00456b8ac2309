#include "engine/cuda_graph.h"

#include "core/uma_error.h"

#ifdef UMA_CUDA_GRAPHS
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/cuda/Exceptions.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <vector>
#endif

namespace uma {

#ifdef UMA_CUDA_GRAPHS

bool cuda_graphs_built() { return true; }

struct CudaGraph::Impl {
  // kept after the capture, so that its nodes can be counted before it is
  // instantiated
  at::cuda::CUDAGraph graph{/*keep_graph=*/true};
};

namespace {

// `to` waits for the work queued on `from` so far.
void wait_for(const c10::cuda::CUDAStream& from, const c10::cuda::CUDAStream& to) {
  at::cuda::CUDAEvent done;
  done.record(from);
  done.block(to);
}

// Bytes LibTorch's CUDA allocator holds on the device (all pools).
double reserved_bytes(c10::DeviceIndex device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  return static_cast<double>(stats.reserved_bytes[0].current);  // [0]: all pools together
}

CudaGraph::Nodes count_nodes(cudaGraph_t graph) {
  size_t n = 0;
  AT_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  AT_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  CudaGraph::Nodes out;
  for (size_t i = 0; i < n; ++i) {
    cudaGraphNodeType type;
    AT_CUDA_CHECK(cudaGraphNodeGetType(nodes[i], &type));
    if (type == cudaGraphNodeTypeKernel)
      ++out.kernels;
    else if (type == cudaGraphNodeTypeMemcpy || type == cudaGraphNodeTypeMemset)
      ++out.memory;
    else
      ++out.other;
  }
  return out;
}

}  // namespace

std::unique_ptr<CudaGraph> CudaGraph::capture(const torch::Device& device,
                                              const std::function<void()>& step) {
  if (!device.is_cuda()) throw Error("CUDA graphs need a CUDA device, not " + device.str());
  c10::cuda::CUDAGuard on_device(device);
  const c10::DeviceIndex index = c10::cuda::current_device();  // `device` may carry no index
  const auto caller = c10::cuda::getCurrentCUDAStream();
  const auto side = c10::cuda::getStreamFromPool();
  auto impl = std::make_unique<Impl>();
  double before = 0;
  Nodes nodes;
  wait_for(caller, side);
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    step();  // warm-up, eager: its errors are the step's own
    // The warm-up's freed blocks go back to the device: the capture draws
    // from a private pool that cannot reuse them, and at 4,000 Cu atoms (47
    // GB a step) cache and pool do not both fit in an H200's 140 GB.
    c10::cuda::CUDACachingAllocator::emptyCache();
    before = reserved_bytes(index);  // what the capture adds is its pool
    impl->graph.capture_begin();
    try {
      step();
      impl->graph.capture_end();
      nodes = count_nodes(impl->graph.raw_cuda_graph());
      impl->graph.instantiate();  // now, not at the first replay
    } catch (const std::exception& e) {
      try {
        impl->graph.capture_end();  // ends the stream's capture mode
      } catch (const std::exception&) {
      }
      throw Error(std::string("the step could not be captured as a CUDA graph: ") + e.what());
    }
  }
  wait_for(side, caller);
  const double pool = reserved_bytes(index) - before;
  return std::unique_ptr<CudaGraph>(new CudaGraph(std::move(impl), pool, nodes));
}

void CudaGraph::replay() { impl_->graph.replay(); }

#else

bool cuda_graphs_built() { return false; }

struct CudaGraph::Impl {};

std::unique_ptr<CudaGraph> CudaGraph::capture(const torch::Device&, const std::function<void()>&) {
  throw Error(
      "this build of the engine has no CUDA graph support (it was compiled without the CUDA "
      "headers)");
}

void CudaGraph::replay() {}

#endif

CudaGraph::CudaGraph(std::unique_ptr<Impl> impl, double pool_bytes, Nodes nodes)
    : impl_(std::move(impl)), pool_bytes_(pool_bytes), nodes_(nodes) {}
CudaGraph::~CudaGraph() = default;

}  // namespace uma
