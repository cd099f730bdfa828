// The uneven all-gather and reduce-scatter of expert tensor parallelism: every ETP rank brings a
// different number of token rows (what its own all-to-all delivered), so Megatron-LM gathers with
// output_split_sizes and reduce-scatters with input_split_sizes (gather_from_sequence_parallel_region /
// reduce_scatter_to_sequence_parallel_region in megatron/core/tensor_parallel/mappings.py). Both are
// carried here as one all_to_all with split sizes: all_gather_v sends this rank's rows to each of the n−1
// others ((n−1)·counts[rank] rows), reduce_scatter_v sends every other rank its segment (Σ counts −
// counts[rank] rows), what a ring moves when the counts are equal. They are recorded as all_to_all calls
// under the caller's label.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/comm/process_group.h"

namespace tpsp::moe {

/// x [counts[rank], ...] on each rank of `group` → [Σ counts, ...]: every rank's rows in rank order.
/// ShapeError when counts do not have one entry per rank or x.size(0) != counts[rank].
Tensor all_gather_v(comm::ProcessGroup& group, const Tensor& x, const std::vector<int64_t>& counts,
                    const comm::CallOpts& o = {});

/// x [Σ counts, ...] on each rank → [counts[rank], ...]: this rank's segment summed over the ranks, in rank
/// order (float32 sums). ShapeError when counts do not have one entry per rank or x.size(0) != Σ counts.
Tensor reduce_scatter_v(comm::ProcessGroup& group, const Tensor& x, const std::vector<int64_t>& counts,
                        const comm::CallOpts& o = {});

}  // namespace tpsp::moe
