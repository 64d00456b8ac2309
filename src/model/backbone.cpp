#include "model/backbone.h"

#include <algorithm>
#include <optional>

#include "edges/edge_rotation.h"
#include "edges/edge_chunks.h"
#include "edges/edge_segments.h"
#include "edges/table_rows.h"
#include "core/uma_error.h"

namespace uma {

BackboneImpl::BackboneImpl(const BackboneConfig& c)
    : config_(c), gaussian_(c.cutoff, c.num_distance_basis) {
  const int64_t C = c.sphere_channels, E = c.edge_channels, Z = c.max_num_elements;
  sphere_embedding = register_module("sphere_embedding", torch::nn::Embedding(Z, C));
  auto charge = register_module("charge_embedding", NamedModule());
  charge_table = charge->add("rand_emb", torch::nn::Embedding(201, C));
  auto spin = register_module("spin_embedding", NamedModule());
  spin_table = spin->add("rand_emb", torch::nn::Embedding(101, C));
  if (c.use_dataset_embedding) {
    auto ds = register_module("dataset_embedding", NamedModule());
    dataset_emb_dict = ds->add("dataset_emb_dict", torch::nn::ModuleDict());
    for (const auto& [name, target] : c.dataset_mapping)
      if (!dataset_emb_dict->contains(name))
        dataset_emb_dict->update({{name, torch::nn::Embedding(1, C).ptr()}});
    mix_csd = register_module("mix_csd", torch::nn::Linear(3 * C, C));
  } else {
    mix_csd = register_module("mix_csd", torch::nn::Linear(2 * C, C));
  }
  source_embedding = register_module("source_embedding", torch::nn::Embedding(Z, E));
  target_embedding = register_module("target_embedding", torch::nn::Embedding(Z, E));

  const std::vector<int64_t> radial{c.num_distance_basis + 2 * E, E, E};
  auto ede = register_module("edge_degree_embedding", NamedModule());
  auto rad = radial;
  rad.push_back(3 * C);
  edge_degree_rad = ede->add("rad_func", edges::RadialMLP(rad));

  auto blocks = register_module("blocks", torch::nn::ModuleList());
  for (int i = 0; i < c.num_layers; ++i) {
    blocks_.emplace_back(C, c.hidden_channels, radial, c.num_experts);
    blocks->push_back(blocks_.back());
  }
  norm = register_module("norm", nn::RMSNormSH(C));
  if (c.num_experts > 0) {
    const int64_t X = c.num_experts;
    const int64_t in = (c.use_composition_embedding ? 2 : 1) * C;
    routing_mlp = register_module(
        "routing_mlp", torch::nn::Sequential(torch::nn::Linear(in, 2 * X), torch::nn::SiLU(),
                                             torch::nn::Linear(2 * X, 2 * X), torch::nn::SiLU(),
                                             torch::nn::Linear(2 * X, X), torch::nn::SiLU()));
    if (c.use_composition_embedding)
      composition_embedding = register_module("composition_embedding", torch::nn::Embedding(Z, C));
  }
}

torch::Tensor BackboneImpl::system_embedding(const BatchTensors& in) {
  auto chg = edges::table_rows(charge_table->weight, in.charge + 100);
  auto spn = edges::table_rows(spin_table->weight, in.spin);
  if (!config_.use_dataset_embedding)
    return torch::silu(mix_csd->forward(torch::cat({chg, spn}, 1)));
  std::vector<torch::Tensor> rows;
  for (const auto& name : in.datasets) {
    auto it = config_.dataset_mapping.find(name);
    if (it == config_.dataset_mapping.end()) throw Error("unknown dataset '" + name + "'");
    rows.push_back((*dataset_emb_dict)[it->second]->as<torch::nn::Embedding>()->weight[0]);
  }
  auto ds = torch::stack(rows, 0);
  return torch::silu(mix_csd->forward(torch::cat({chg, spn, ds}, 1)));
}

torch::Tensor BackboneImpl::expert_coefficients(const BatchTensors& in,
                                                const torch::Tensor& system_emb,
                                                double routing_dropout) {
  const int64_t B = system_emb.size(0);
  torch::Tensor routing_in = system_emb;
  if (config_.use_composition_embedding) {
    auto per_atom = edges::table_rows(composition_embedding->weight, in.numbers);
    auto sums = edges::sum_into_nodes(per_atom, in.batch, B);
    auto denom =
        in.natoms.to(per_atom.scalar_type()) + (config_.composition_include_self ? 1.0 : 0.0);
    routing_in = torch::cat({sums / denom.unsqueeze(1), system_emb}, 1);
  }
  auto logits = routing_mlp->forward(routing_in);
  if (routing_dropout > 0) logits = torch::dropout(logits, routing_dropout, /*train=*/true);
  return torch::softmax(logits, 1) + 0.005;
}

torch::Tensor BackboneImpl::balance_channels(const torch::Tensor& x, const BatchTensors& in) {
  if (config_.charge_channel_end <= config_.charge_channel_begin &&
      config_.spin_channel_end <= config_.spin_channel_begin)
    return x;
  // x is read both before the sums over processes and after them: a leaf of
  // its own under a staged backward, so that each stage stops at it.
  auto out = in.share ? in.share({x})[0] : x;
  auto balance = [&](int begin, int end, const torch::Tensor& target) {
    const int64_t n = end - begin;
    const int64_t B = in.natoms.size(0);
    auto ch = out.select(1, 0).narrow(1, begin, n);  // [N, n]
    const bool all_owned = in.owned < 0;
    auto owned = all_owned ? ch : ch.narrow(0, 0, in.owned);
    auto owned_batch = all_owned ? in.batch : in.batch.narrow(0, 0, in.owned);
    auto sums = edges::sum_into_nodes(owned, owned_batch, B);
    if (in.reduce) sums = in.reduce(sums);
    auto corr = (sums - target.to(ch.scalar_type()).unsqueeze(1)) /
                in.natoms.to(ch.scalar_type()).unsqueeze(1);
    auto row0 = out.select(1, 0);
    row0 = torch::cat({row0.narrow(1, 0, begin), ch - edges::gather_from_nodes(corr, in.batch),
                       row0.narrow(1, end, row0.size(1) - end)},
                      1);
    out = torch::cat({row0.unsqueeze(1), out.narrow(1, 1, 8)}, 1);
  };
  if (config_.charge_channel_end > config_.charge_channel_begin)
    balance(config_.charge_channel_begin, config_.charge_channel_end, in.charge);
  if (config_.spin_channel_end > config_.spin_channel_begin)
    balance(config_.spin_channel_begin, config_.spin_channel_end, in.spin - 1);
  return out;
}

edges::EdgeFrame BackboneImpl::edge_frame(const BatchTensors& in, const EdgeInput& e,
                                          const torch::Tensor& vec, int64_t begin) {
  const int64_t n = vec.size(0);
  edges::EdgeFrame frame;
  frame.src = e.src.narrow(0, begin, n);
  frame.tgt = e.tgt.narrow(0, begin, n);
  frame.valid = e.valid.narrow(0, begin, n);
  // Padding slots get a vector beyond the cutoff, whose envelope is exactly zero.
  auto far = torch::full({1, 3}, config_.cutoff + 1.0, vec.options());
  auto v = torch::where(frame.valid.unsqueeze(1), vec, far);
  auto dist = v.norm(2, 1);
  frame.backend = e.backend;
  frame.backend->prepare(frame, edge_wigner(v), edges::polynomial_envelope(dist / config_.cutoff),
                         in.numbers.size(0));
  frame.radial_input = {gaussian_(dist), in.numbers.index_select(0, frame.src),
                        in.numbers.index_select(0, frame.tgt), source_embedding->weight,
                        target_embedding->weight};
  return frame;
}

torch::Tensor BackboneImpl::edge_degree(const edges::EdgeFrame& frame, int64_t nodes) {
  // m = 0 radial coefficients rotated back to nodes
  const int64_t C = config_.sphere_channels;
  auto radial = edge_degree_rad->forward(frame.radial_input).view({-1, 3, C});
  return frame.backend->degree(frame, radial, nodes);
}

torch::Tensor BackboneImpl::forward(const BatchTensors& in, const EdgeInput& e,
                                    const torch::Tensor& system_emb,
                                    const edges::MoleContext& ctx) {
  const int64_t N = in.numbers.size(0), C = config_.sphere_channels;
  auto sys_node = edges::gather_from_nodes(system_emb, in.batch);  // [N, C]
  auto x0 = edges::table_rows(sphere_embedding->weight, in.numbers) + sys_node;
  auto x = torch::cat({x0.unsqueeze(1), torch::zeros({N, 8, C}, e.vec.options())}, 1);

  // Stored: one frame that every block reads.  Recomputed (e.recompute_chunk
  // > 0): none; each chunk of edges builds its own and drops it.
  std::optional<edges::EdgeFrame> stored;
  if (e.recompute_chunk == 0) {
    stored = edge_frame(in, e, e.vec, 0);
    if (in.share) {  // read by every block: new leaves, differentiated once
      auto reseat = stored->backend->rotations(*stored);
      reseat.push_back(&stored->radial_input.basis);
      std::vector<torch::Tensor> read;
      for (auto* t : reseat) read.push_back(*t);
      auto shared = in.share(read);
      for (size_t k = 0; k < reseat.size(); ++k) *reseat[k] = shared[k];
    }
  }
  const int64_t all_edges = e.vec.size(0);
  // The summed contribution of edges [0, edges): `work(h, frame, ctx)` on the
  // stored frame's prefix, or on each chunk's own frame with the MoLE
  // context's system row offsets clipped to the chunk.  A chunk's work runs
  // again in the backward pass, after forward() returned: what it needs is
  // captured by value.
  using EdgeWork = std::function<torch::Tensor(const torch::Tensor&, const edges::EdgeFrame&,
                                               const edges::MoleContext&)>;
  auto clipped = [](edges::MoleContext c, int64_t begin, int64_t end) {
    for (auto& r : c.row_offsets) r = std::clamp(r, begin, end) - begin;
    return c;
  };
  // What a chunk's work reads that may need a gradient (training): the
  // parameters and, last, the experts' mixing coefficients, which a chunk
  // takes from its reads (the chunked sum asks that of every non-parameter).
  std::vector<torch::Tensor> reads;
  const bool coefficients_read = ctx.coefficients.defined() && ctx.coefficients.requires_grad();
  if (!stored) {
    for (const auto& p : parameters())
      if (p.requires_grad()) reads.push_back(p);
    if (coefficients_read) reads.push_back(ctx.coefficients);
  }
  auto over_edges = [&](int64_t edges, const torch::Tensor& h, EdgeWork work) {
    if (stored)
      return work(h, edges == all_edges ? *stored : stored->first(edges), clipped(ctx, 0, edges));
    return edges::chunked_edge_sum(
        h, e.vec, edges, e.recompute_chunk, {N, 9, C}, reads,
        [this, in, e, ctx, clipped, work, coefficients_read](
            const torch::Tensor& hc, const torch::Tensor& vec,
            const std::vector<torch::Tensor>& chunk_reads, int64_t begin, int64_t end) {
          edges::MoleContext chunk_ctx = clipped(ctx, begin, end);
          if (coefficients_read) chunk_ctx.coefficients = chunk_reads.back();
          return work(hc, edge_frame(in, e, vec, begin), chunk_ctx);
        });
  };

  auto degree = over_edges(all_edges, torch::Tensor(),
                           [this, N](const torch::Tensor&, const edges::EdgeFrame& f,
                                     const edges::MoleContext&) { return edge_degree(f, N); });
  x = exchanged(x + degree / 5.0, in, 0);
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const int64_t edges = i < e.layer_edges.size() ? e.layer_edges[i] : all_edges;
    nn::Block block = blocks_[i];
    auto summed = over_edges(edges, block->before_edges(x, sys_node),
                             [block](const torch::Tensor& h, const edges::EdgeFrame& f,
                                     const edges::MoleContext& c) mutable {
                               return block->edge_wise->forward(h, f, c);
                             });
    x = exchanged(balance_channels(after_edges(block, x, summed, in), in), in, i + 1);
  }
  return norm->forward(x);
}

torch::Tensor BackboneImpl::after_edges(nn::Block& block, const torch::Tensor& x,
                                        const torch::Tensor& summed, const BatchTensors& in) const {
  if (!in.exchange || in.owned < 0) return block->after_edges(x, summed);
  // Halo exchange: messages reach owned atoms only, and the ghosts' rows are
  // replaced by the exchange that follows (or, after the last block, never
  // read but for their zeroed energies): the node-wise work is for owned rows.
  const int64_t n = in.owned, N = x.size(0);
  return torch::cat(
      {block->after_edges(x.narrow(0, 0, n), summed.narrow(0, 0, n)), x.narrow(0, n, N - n)});
}

torch::Tensor BackboneImpl::exchanged(const torch::Tensor& x, const BatchTensors& in,
                                      size_t done) const {
  // The last block's output is read only at owned atoms (the energy head).
  if (!in.exchange || done >= blocks_.size()) return x;
  return in.exchange(x);
}

std::vector<edges::MoleLinear> BackboneImpl::mole_layers() const {
  std::vector<edges::MoleLinear> all;
  for (const auto& b : blocks_) {
    auto l = b->mole_layers();
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

}  // namespace uma
