#include "measure/brute_force_graph.h"

#include <algorithm>
#include <limits>

#include "graph/radius_graph_parts.h"
#include "runtime/transfers.h"

namespace uma {

using namespace graph_parts;

RadiusGraph brute_force_radius_graph(const torch::Tensor& pos_in, const torch::Tensor& cells,
                                     const std::vector<GraphSystem>& systems,
                                     const std::vector<int64_t>& capacity, double cutoff,
                                     int64_t max_neighbors) {
  torch::NoGradGuard no_grad;
  const auto pos = pos_in.detach();
  const auto opts = pos.options();
  const auto lopts = opts.dtype(torch::kLong);
  const double cutoff2 = cutoff * cutoff;
  const double inf = std::numeric_limits<double>::infinity();
  const auto cellf = cells.to(pos.scalar_type());

  RadiusGraph g;
  std::vector<torch::Tensor> src, tgt, off, sys, counts;
  CloseAtoms close(lopts);
  g.row_offsets.push_back(0);

  for (size_t b = 0; b < systems.size(); ++b) {
    const auto& s = systems[b];
    const int64_t cap = capacity[b];
    const auto rep = image_repeats(s.cell, s.pbc, cutoff);
    const auto img_host = image_list(rep);
    const int64_t images = static_cast<int64_t>(img_host.size() / 3);
    auto img_t = upload(img_host, opts).view({images, 3});
    auto shifts = image_shifts(img_t, cellf[static_cast<int64_t>(b)]);  // [S, 3]

    const int64_t n = s.natoms, a0 = s.first_atom;
    const int64_t targets = s.ntargets < 0 ? n : std::min(s.ntargets, n);
    const int64_t candidates = n * images;
    auto P = pos.narrow(0, a0, n);
    auto source_pos = (P.unsqueeze(1) + shifts.unsqueeze(0)).reshape({candidates, 3});
    // Candidate order: source atom slowest, image fastest.
    auto source_atom =
        (torch::arange(n, lopts) + a0).unsqueeze(1).expand({n, images}).reshape({-1});
    auto source_image = torch::arange(images, lopts).repeat({n});

    // Slot cap is the dump slot; padding slots point at the system's last atom.
    const int64_t pad = std::max<int64_t>(0, a0 + n - 1);
    auto src_buf = torch::full({cap + 1}, pad, lopts);
    auto tgt_buf = torch::full({cap + 1}, pad, lopts);
    auto img_buf = torch::zeros({cap + 1}, lopts);
    auto found = torch::zeros({}, lopts);

    const int64_t chunk = std::max<int64_t>(1, kPairsPerChunk / std::max<int64_t>(candidates, 1));
    for (int64_t t0 = 0; t0 < targets; t0 += chunk) {
      const int64_t rows = std::min(chunk, targets - t0);
      auto d2 =
          squared_norm(P.narrow(0, t0, rows).unsqueeze(1) - source_pos.unsqueeze(0));  // [rows, M]
      auto mask = (d2 <= cutoff2) & (d2 != 0);
      close.update(d2, a0 + t0, [&](const torch::Tensor&) { return source_atom; });
      if (max_neighbors > 0 && candidates > max_neighbors) {
        auto masked = torch::where(mask, d2, torch::full({}, inf, opts));
        auto kth =
            std::get<0>(masked.topk(max_neighbors + 1, 1, /*largest=*/false, /*sorted=*/true))
                .select(1, max_neighbors);
        mask = mask & (masked <= (kth + 0.01).unsqueeze(1));
      }
      auto flat = mask.reshape({-1});
      auto rank = torch::cumsum(flat, 0) - 1 + found;
      auto slot = torch::where(flat & (rank < cap), rank, torch::full({}, cap, lopts));
      auto target_atom = (torch::arange(rows, lopts) + (a0 + t0))
                             .unsqueeze(1)
                             .expand({rows, candidates})
                             .reshape({-1});
      src_buf.scatter_(0, slot, source_atom.repeat({rows}));
      img_buf.scatter_(0, slot, source_image.repeat({rows}));
      tgt_buf.scatter_(0, slot, target_atom);
      found = found + flat.sum();
    }
    src.push_back(src_buf.narrow(0, 0, cap));
    tgt.push_back(tgt_buf.narrow(0, 0, cap));
    off.push_back(img_t.index_select(0, img_buf.narrow(0, 0, cap)));
    sys.push_back(torch::full({cap}, static_cast<int64_t>(b), lopts));
    counts.push_back(found);
    g.row_offsets.push_back(g.row_offsets.back() + cap);
    g.capacity.push_back({cap, 0, 0, 0});
  }
  const auto B = static_cast<int64_t>(systems.size());
  g.close_atoms = close.pack();
  g.candidate_counts = torch::zeros({B}, lopts);
  g.neighbor_counts = torch::zeros({B}, lopts);
  finish(g, src, tgt, off, sys, counts, counts, lopts);
  return g;
}

}  // namespace uma
