// The step each lab's prediction is about, and its calls on rank 0 in issue order, as closed forms of
// the step's sizes: the same calls checkers/*/expected.cpp's patterns require of these layers
// (lab00 ring_all_reduce, lab01 mlp, lab02 cross_entropy, lab03 mlp under SP + sp_grad_sync, lab04
// column_overlap), at sizes of a realistic scale. tests/predict/test_steps_match_recorder.cpp runs
// each step with the engine's solution and requires the recorder's calls to equal these.
#include <fmt/format.h>

#include <stdexcept>

#include "checkers/predict/predict.h"

namespace tpsp::checkers::predict {

namespace {

using comm::OpKind;
using comm::ReduceOp;

constexpr uint64_t kF32 = 4;

/// "[512, 2, 256] f32 (1 MiB)".
std::string tensor(const std::vector<int64_t>& shape, uint64_t bytes) {
  std::string dims;
  for (int64_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  return fmt::format("[{}] f32 ({})", dims, human_bytes(bytes));
}

Call call(const char* phase, OpKind op, const char* group, uint64_t bytes, int64_t dim = -1, int peer = -1,
          ReduceOp reduce = ReduceOp::sum) {
  Call c;
  c.phase = phase;
  c.op = op;
  c.group = group;
  c.bytes = bytes;
  c.dim = dim;
  c.peer = peer;
  c.reduce = reduce;
  return c;
}

// lab00: one ring all-reduce of N floats on a world of 4, rank 0's sends and receives. The ring is a
// reduce-scatter (n−1 steps) then an all-gather (n−1 steps); each step sends one chunk N/n to rank
// r+1 (posted first, async) and receives one from rank r−1.
Step lab00() {
  constexpr int n = 4;
  constexpr int64_t N = 262144;
  const uint64_t chunk = N / n * kF32;
  Step s{.lab = "lab00",
         .title = "rank 0's calls in ring_all_reduce of a [262144] f32 tensor (1 MiB) on a world of 4 ranks",
         .phases = {"reduce_scatter", "all_gather"},
         .group_size = n,
         .sizes = {{"N", N}, {"world", n}}};
  const std::string t = "one chunk " + tensor({N / n}, chunk);
  for (const char* phase : {"reduce_scatter", "all_gather"}) {
    const bool rs = std::string(phase) == "reduce_scatter";
    for (int i = 1; i < n; ++i) {
      s.calls.push_back(
          {call(phase, OpKind::send, "world", chunk, -1, 1), t,
           fmt::format("{} step {} of {}: send {} to the next rank (r+1 = 1), posted first (send_async) so "
                       "that the receive below can run at the same time",
                       rs ? "reduce-scatter" : "all-gather", i, n - 1,
                       rs ? (i == 1 ? "your chunk r−1 = 3" : "the partial sum you received last")
                          : (i == 1 ? "your summed chunk 0" : "the chunk you received last"))});
      s.calls.push_back({call(phase, OpKind::recv, "world", chunk, -1, n - 1), t,
                         fmt::format("{} step {} of {}: receive from the previous rank (r−1 = 3){}",
                                     rs ? "reduce-scatter" : "all-gather", i, n - 1,
                                     rs ? " a partial sum and add your own chunk to it"
                                        : " a summed chunk, into its place")});
    }
  }
  s.hints = {{"", OpKind::all_reduce,
              "lab00 builds the all-reduce from send and recv only: no collective is called"},
             {"", OpKind::all_gather,
              "lab00 builds the all-gather from send and recv only: no collective is called"},
             {"", OpKind::reduce_scatter,
              "lab00 builds the reduce-scatter from send and recv only: no collective is called"}};
  return s;
}

/// The MLP step's sizes (lab01, lab03, lab04): s=512, b=2, h=256, ffn=4h, tp=2, f32.
constexpr int64_t S = 512, B = 2, H = 256, FFN = 4 * H, TP = 2;
constexpr uint64_t kSbh = S * B * H * kF32;  // 1 MiB
const std::map<std::string, int64_t> kMlpSizes{{"s", S}, {"b", B}, {"h", H}, {"ffn", FFN}, {"tp", TP}};

// lab01: the TP MLP without SP: f → fc1 (ColumnParallelLinear h→4h) → GeLU → fc2 (RowParallelLinear
// 4h→h) → g, one forward and one backward.
Step lab01() {
  Step s{.lab = "lab01",
         .title =
             "one step of the TP MLP: X [512, 2, 256] → f → fc1 = ColumnParallelLinear 256→1024 → GeLU → "
             "fc2 = RowParallelLinear 1024→256 → g, forward then backward, tp=2, no SP, f32",
         .phases = {"forward", "backward"},
         .group_size = TP,
         .sizes = kMlpSizes};
  s.calls = {
      {call("forward", OpKind::all_reduce, "tp", kSbh), "the output Y " + tensor({S, B, H}, kSbh),
       "g = reduce_from_tensor_model_parallel_region after fc2: each rank's Y_r = GeLU(X·A_rᵀ)·B_rᵀ sums "
       "only "
       "its 512 of the 1024 inner columns, a partial sum; the all-reduce adds the ranks' partial outputs"},
      {call("backward", OpKind::all_reduce, "tp", kSbh), "the input gradient dX " + tensor({S, B, H}, kSbh),
       "f = copy_to_tensor_model_parallel_region before fc1: each rank's dX_r = dY_r·A_r covers only its 512 "
       "output columns of fc1, a partial sum; f's backward all-reduces it"}};
  s.hints = {
      {"forward", OpKind::all_reduce,
       "the forward has one all-reduce, g's after fc2: f before fc1 is the identity in forward (every rank "
       "already holds the whole X)"},
      {"backward", OpKind::all_reduce,
       "the backward has one all-reduce, f's: g's backward passes dY on unchanged (it is already whole on "
       "every rank), and each rank's weight gradients are gradients of its own shard, with no communication"},
      {"", OpKind::all_gather,
       "without SP nothing is gathered: fc1's output stays split on its last dim (gather_output=false) and "
       "fc2 takes it split (input_is_parallel=true)"},
      {"", OpKind::reduce_scatter, "a reduce-scatter appears only with sequence parallelism (lab03)"}};
  return s;
}

// lab02: vocab-parallel cross entropy forward and backward on logits [s·b, V/tp] per rank.
Step lab02() {
  constexpr int64_t V = 1024, N = S * B;
  constexpr uint64_t rows = N * kF32;
  Step s{.lab = "lab02",
         .title =
             "vocab-parallel cross entropy, forward then backward: logits [1024, 1024] (s·b = 512·2 tokens, "
             "V = 1024), each rank holding [1024, 512] (its V/tp columns), tp=2, no label smoothing, f32",
         .phases = {"forward", "backward"},
         .group_size = TP,
         .sizes = {{"s", S}, {"b", B}, {"vocab", V}, {"tp", TP}}};
  const std::string t = "one float per token " + tensor({N}, rows);
  s.calls = {{call("forward", OpKind::all_reduce, "tp", rows, -1, -1, ReduceOp::max), t,
              "the max logit of each token over the WHOLE vocabulary (reduce=max), subtracted before exp so "
              "that exp cannot overflow: each rank knows only the max of its own 512 columns"},
             {call("forward", OpKind::all_reduce, "tp", rows), t,
              "the target's logit: only the rank whose vocabulary range holds the target has it, the others "
              "contribute 0, and the sum gives it to every rank"},
             {call("forward", OpKind::all_reduce, "tp", rows), t,
              "Σ exp(logit − max) over the whole vocabulary: the softmax's denominator, a sum of the ranks' "
              "partial sums"}};
  s.hints = {
      {"backward", OpKind::all_reduce,
       "the backward needs no communication: each rank's gradient softmax − one_hot(target) of its own "
       "512 columns uses the softmax saved in forward"},
      {"", OpKind::all_gather,
       "the logits are never gathered: a [s·b, V] tensor per rank is what the vocab-parallel loss avoids"}};
  return s;
}

// lab03: the lab01 MLP with sequence parallelism, then the gradient sum of fc2's (replicated) bias.
Step lab03() {
  Step s{.lab = "lab03",
         .title =
             "one step of the TP MLP with sequence parallelism: each rank holds X's shard [256, 2, 256] "
             "(s/tp rows); fc1 = ColumnParallelLinear 256→1024, GeLU, fc2 = RowParallelLinear 1024→256, "
             "forward, backward, then finalize_grads (allreduce_sequence_parallel_grads of fc2's bias "
             "gradient); tp=2, f32",
         .phases = {"forward", "backward", "finalize_grads"},
         .group_size = TP,
         .sizes = kMlpSizes};
  const std::string whole = tensor({S, B, H}, kSbh);
  s.calls = {
      {call("forward", OpKind::all_gather, "tp", kSbh, 0), "its output, X gathered whole, " + whole,
       "fc1's gather_from_sequence_parallel_region (in place of f): each rank holds s/tp = 256 rows of X, "
       "and the column-parallel GEMM needs every token"},
      {call("forward", OpKind::reduce_scatter, "tp", kSbh, 0), "fc2's partial output " + whole,
       "fc2's reduce_scatter_to_sequence_parallel_region (in place of g's all-reduce): the ranks' partial "
       "outputs are summed and each keeps its 256 rows, [256, 2, 256]"},
      {call("backward", OpKind::all_gather, "tp", kSbh, 0), "its output, dY gathered whole, " + whole,
       "fc2's backward: the reduce-scatter's backward is an all-gather of dY's sequence shards (the pair is "
       "conjugate)"},
      {call("backward", OpKind::all_gather, "tp", kSbh, 0), "its output, X gathered whole again, " + whole,
       "fc1's weight gradient dA_r = dY_rᵀ·X needs the whole X, and only the shard was saved: it is gathered "
       "again (Megatron's LinearWithGradAccumulationAndAsyncCommunication)"},
      {call("backward", OpKind::reduce_scatter, "tp", kSbh, 0), "the partial input gradient dX " + whole,
       "fc1's backward: the all-gather's backward is a reduce-scatter, summing the ranks' partial dX_r and "
       "leaving each its 256 rows"},
      {call("finalize_grads", OpKind::all_reduce, "tp", H * kF32),
       "fc2's bias gradient " + tensor({H}, H * kF32),
       "fc2's bias is replicated, but under SP each rank's db = Σ dY covers only its own 256 tokens: "
       "allreduce_sequence_parallel_grads SUMS it over TP (not an average)"}};
  s.hints = {{"forward", OpKind::all_reduce,
              "with SP there is no all-reduce in forward: g's all-reduce becomes a reduce-scatter and f an "
              "all-gather"},
             {"backward", OpKind::all_reduce,
              "with SP there is no all-reduce in backward: f's backward becomes a reduce-scatter"}};
  return s;
}

// lab04: ColumnParallelLinear h→4h with tp_comm_overlap and SP: forward all_gather_matmul's ring,
// backward the async all-gather (hidden by dgrad) and reduce-scatter (hidden by wgrad).
Step lab04() {
  const uint64_t shard = kSbh / TP;
  Step s{.lab = "lab04",
         .title =
             "one step of an overlapped ColumnParallelLinear 256→1024 (tp_comm_overlap, SP): each rank "
             "holds X's shard [256, 2, 256], forward then backward, tp=2, f32",
         .phases = {"forward", "backward"},
         .group_size = TP,
         .sizes = kMlpSizes};
  const std::string t = "X's shard " + tensor({S / TP, B, H}, shard);
  s.calls = {
      {call("forward", OpKind::send, "tp", shard, -1, 1), t,
       "all_gather_matmul's ring, step 1 of 2: send the shard you hold to rank r+1 = 1 while multiplying it"},
      {call("forward", OpKind::recv, "tp", shard, -1, 1), t,
       "all_gather_matmul's ring, step 1 of 2: receive rank r−1's shard (rank 1 at tp=2) into a fresh "
       "buffer, "
       "multiplied at step 2 (the last step sends nothing)"},
      {call("backward", OpKind::all_gather, "tp", kSbh, 0),
       "its output, X gathered whole, " + tensor({S, B, H}, kSbh),
       "the weight gradient's input, all_gather_async issued BEFORE the dgrad GEMM dX = dY·A, which does not "
       "need it"},
      {call("backward", OpKind::reduce_scatter, "tp", kSbh, 0), "the partial dX " + tensor({S, B, H}, kSbh),
       "reduce_scatter_async of dX issued BEFORE the weight-gradient GEMM dA = dYᵀ·X and waited after it"}};
  s.hints = {
      {"forward", OpKind::all_gather,
       "with tp_comm_overlap the forward all-gather is the ring of send/recv inside all_gather_matmul: "
       "no all_gather call"},
      {"", OpKind::all_reduce, "under SP the column layer never all-reduces: dX is reduce-scattered"}};
  return s;
}

const std::vector<Step>& steps() {
  static const std::vector<Step> all{lab00(), lab01(), lab02(), lab03(), lab04()};
  return all;
}

}  // namespace

const Step& step_of(const std::string& lab) {
  for (const Step& s : steps())
    if (s.lab == lab) return s;
  throw std::invalid_argument(fmt::format("no prediction step for '{}' (labs with one: lab00 … lab04)", lab));
}

std::vector<std::string> step_labs() {
  std::vector<std::string> out;
  for (const Step& s : steps()) out.push_back(s.lab);
  return out;
}

std::string human_bytes(uint64_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1ull << 10) && bytes % (1ull << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

}  // namespace tpsp::checkers::predict
