#include "engine/comm/shapes.h"

#include <algorithm>

#include "engine/error.h"

namespace tpsp::comm {

int64_t normalize_dim(const Tensor& t, int64_t dim, const char* op, const std::string& group) {
  const int64_t nd = t.dim();
  const int64_t d = dim < 0 ? dim + nd : dim;
  TPSP_CHECK(d >= 0 && d < nd, op, " in group ", group, ": dim ", dim, " is out of range for input ",
             shape_str(t.shape()));
  return d;
}

void check_tensor(const Tensor& t, const char* op, const std::string& group, const Backend& backend) {
  TPSP_CHECK(t.defined(), op, " in group ", group, ": the tensor is undefined (no storage)");
  TPSP_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::bf16, op, " in group ", group,
             ": tensors are f32 or bf16, got ", dtype_name(t.dtype()));
  TPSP_CHECK(backend.accepts(t.device()), op, " in group ", group, ": the ", backend.name(),
             " backend does not move ", device_name(t.device()), " tensors");
}

Shape all_gather_shape(const Tensor& in, int64_t dim, int n, const std::string& group,
                       const Backend& backend) {
  check_tensor(in, "all_gather", group, backend);
  const int64_t d = normalize_dim(in, dim, "all_gather", group);
  Shape s = in.shape();
  s[static_cast<std::size_t>(d)] *= n;
  return s;
}

Shape reduce_scatter_shape(const Tensor& in, int64_t dim, int n, const std::string& group,
                           const Backend& backend) {
  check_tensor(in, "reduce_scatter", group, backend);
  const int64_t d = normalize_dim(in, dim, "reduce_scatter", group);
  Shape s = in.shape();
  const int64_t e = s[static_cast<std::size_t>(d)];
  TPSP_CHECK(e % n == 0, "reduce_scatter in group ", group, ": dim ", d, " extent ", e, " of input ",
             shape_str(in.shape()), " is not divisible by the group size ", n);
  s[static_cast<std::size_t>(d)] = e / n;
  return s;
}

void check_all_to_all(const Tensor& in, int n, const std::string& group, const Backend& backend) {
  check_tensor(in, "all_to_all", group, backend);
  TPSP_CHECK(in.dim() >= 1, "all_to_all in group ", group, ": input must have at least one dimension");
  TPSP_CHECK(in.size(0) % n == 0, "all_to_all in group ", group, ": dim 0 extent ", in.size(0), " of input ",
             shape_str(in.shape()), " is not divisible by the group size ", n);
}

void check_all_to_all_splits(const Tensor& in, const std::vector<int64_t>& output_split_sizes,
                             const std::vector<int64_t>& input_split_sizes, int rank, int n,
                             const std::string& group, const Backend& backend) {
  check_tensor(in, "all_to_all", group, backend);
  TPSP_CHECK(in.dim() >= 1, "all_to_all in group ", group, ": input must have at least one dimension");
  auto list = [](const std::vector<int64_t>& v) { return shape_str(Shape(v.begin(), v.end())); };
  int64_t row = 1;  // elements of one row; the rows of either side must fit a tensor of kMaxSplitElements
  for (int64_t d = 1; d < in.dim(); ++d) row *= in.size(d);
  int64_t rows = 0;
  for (const auto* sizes : {&output_split_sizes, &input_split_sizes}) {
    const char* name = sizes == &input_split_sizes ? "input_split_sizes" : "output_split_sizes";
    TPSP_CHECK(sizes->size() == static_cast<std::size_t>(n), "all_to_all in group ", group, ": ", name, " ",
               list(*sizes), " has ", sizes->size(), " entries, but the group has ", n, " ranks");
    rows = 0;
    for (std::size_t j = 0; j < sizes->size(); ++j) {
      TPSP_CHECK((*sizes)[j] >= 0, "all_to_all in group ", group, ": ", name, "[", j, "] = ", (*sizes)[j],
                 " is negative");
      TPSP_CHECK(!__builtin_add_overflow(rows, (*sizes)[j], &rows) &&
                     rows <= kMaxSplitElements / std::max<int64_t>(row, 1),
                 "all_to_all in group ", group, ": ", name, " ", list(*sizes), " add up to more than ",
                 kMaxSplitElements, " elements of rows of ", row);
    }
  }
  TPSP_CHECK(rows == in.size(0), "all_to_all in group ", group, ": input_split_sizes ",
             list(input_split_sizes), " add up to ", rows, " rows, but the input ", shape_str(in.shape()),
             " has ", in.size(0));
  const auto me = static_cast<std::size_t>(rank);
  TPSP_CHECK(input_split_sizes[me] == output_split_sizes[me], "all_to_all in group ", group, ": group rank ",
             rank, " sends ", input_split_sizes[me], " row(s) to itself (input_split_sizes[", rank,
             "]) but expects ", output_split_sizes[me], " from itself (output_split_sizes[", rank, "])");
}

void check_peer(int peer, int n, const char* what, const char* op, const std::string& group) {
  TPSP_CHECK(peer >= 0 && peer < n, op, " in group ", group, ": ", what, "=", peer,
             " is not a rank of the group (size ", n, ")");
}

void prepare_out(Tensor& out, const Shape& shape, DType dtype, const char* op, const std::string& group,
                 Device device) {
  if (!out.defined()) {
    out = Tensor::empty(shape, dtype, device);  // every element is written by the collective
    return;
  }
  TPSP_CHECK(out.shape() == shape, op, " in group ", group, ": output has shape ", shape_str(out.shape()),
             " but the result has shape ", shape_str(shape));
  TPSP_CHECK(out.dtype() == dtype, op, " in group ", group, ": output is ", dtype_name(out.dtype()),
             " but the input is ", dtype_name(dtype));
  TPSP_CHECK(out.device() == device, op, " in group ", group, ": output is on ", device_name(out.device()),
             " but the input is on ", device_name(device));
}

}  // namespace tpsp::comm
