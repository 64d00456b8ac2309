#include "edges/table_rows.h"

#include "edges/edge_segments.h"

namespace uma::edges {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// rows: [n, F] -> [R, F], the rows of each index summed: one-hot(index)^T @ rows.
torch::Tensor sum_by_index(const torch::Tensor& rows, const torch::Tensor& index, int64_t R) {
  const auto dtype = rows.scalar_type() == torch::kFloat32 ? torch::kFloat64 : rows.scalar_type();
  auto one_hot = torch::zeros({index.size(0), R}, rows.options().dtype(dtype))
                     .scatter_(1, index.unsqueeze(1), 1.0);  // [n, R]
  return one_hot.t().mm(rows.to(dtype)).to(rows.scalar_type());
}

class TableRows : public torch::autograd::Function<TableRows> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& table,
                               const torch::Tensor& index) {
    ctx->save_for_backward({index});
    ctx->saved_data["rows"] = table.size(0);
    return table.index_select(0, index);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads);
};

class RowSums : public torch::autograd::Function<RowSums> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& rows,
                               const torch::Tensor& index, int64_t R) {
    ctx->save_for_backward({index});
    return sum_by_index(rows, index, R);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {TableRows::apply(grads[0], ctx->get_saved_variables()[0]), {}, {}};
  }
};

variable_list TableRows::backward(AutogradContext* ctx, variable_list grads) {
  const auto R = ctx->saved_data["rows"].toInt();
  return {RowSums::apply(grads[0], ctx->get_saved_variables()[0], R), {}};
}

}  // namespace

torch::Tensor table_rows(const torch::Tensor& table, const torch::Tensor& index) {
  if (!sums_in_segments(table.device())) return torch::embedding(table, index);
  if (!table.requires_grad()) return table.index_select(0, index);
  return TableRows::apply(table, index);
}

}  // namespace uma::edges
