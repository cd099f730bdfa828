// Known cases M1–M5 (docs/known_cases.md): the f/g and sequence-parallel mappings of
// engine/tensor_parallel/mappings.h, on real process groups. Every value here is a sum of small
// integers or a copy, exact in float32, so results are compared with ==.
#include "engine/model/gpt.h"
#include "engine/tensor_parallel/layers.h"
#include "engine/tensor_parallel/mappings.h"
#include "tests/cases/cases_util.h"

using namespace tpsp;
using namespace tpsp::cases;
using namespace tpsp::tensor_parallel;
using comm::OpKind;

TEST_CASE("case M1: f and g at tp=4 inside a world of 8 (dp=2)") {
  run_case(8, [](int rank) {
    auto world = comm::init_from_env();
    ParallelState ps(world, 4);
    comm::ProcessGroup& tp = ps.tp();
    // The TP group is 4 consecutive world ranks, not the world.
    expect(tp.size() == 4 && world->size() == 8, "the TP group must have 4 of the 8 ranks");
    const int first = rank / 4 * 4;
    expect(tp.global_ranks() == std::vector<int>{first, first + 1, first + 2, first + 3},
           "TP group of rank " + std::to_string(rank) + " is not its 4 consecutive ranks");

    const Tensor x = Tensor::from({1}, {float(rank)});
    const Tensor same = Tensor::from({1}, {float(rank)});
    const Tensor sum = Tensor::from({1}, {rank < 4 ? 6.f : 22.f});  // 0+1+2+3, 4+5+6+7
    const std::size_t before = world->recorder().size();
    expect_equal(copy_to_tensor_model_parallel_region.forward(x, tp, "m1.f"), same, "f forward");
    expect_equal(copy_to_tensor_model_parallel_region.backward(x, tp, "m1.f"), sum, "f backward");
    expect_equal(reduce_from_tensor_model_parallel_region.forward(x, tp, "m1.g"), sum, "g forward");
    expect_equal(reduce_from_tensor_model_parallel_region.backward(x, tp, "m1.g"), same, "g backward");
    expect_equal(x, same, "the input of f/g is not modified");
    // Exactly two all-reduces (f backward, g forward), both on the 4-rank TP group.
    const auto recs = records_since(*world, before);
    expect(recs.size() == 2, "f/g made " + std::to_string(recs.size()) + " calls, want 2 all-reduces");
    for (const auto& r : recs)
      expect(r.op == OpKind::all_reduce && r.group == "tp" && r.group_size == 4,
             "f/g collective '" + r.label + "' ran on group " + r.group + " of size " +
                 std::to_string(r.group_size) + ", want an all_reduce on the TP group of 4");
  });
}

TEST_CASE("case M2: SP gather and reduce-scatter at tp=4") {
  run_case(4, [](int) {
    ParallelState ps(comm::init_from_env(), 4);
    comm::ProcessGroup& tp = ps.tp();
    const float r = float(tp.rank());
    std::vector<float> gathered;
    for (int k = 0; k < 4; ++k) gathered.insert(gathered.end(), 4, float(k));
    const Tensor want_gather = Tensor::from({16}, gathered);
    const Tensor x = Tensor::full({4}, r);
    expect_equal(gather_from_sequence_parallel_region.forward(x, tp, "m2.ag"), want_gather, "AG forward");
    expect_equal(reduce_scatter_to_sequence_parallel_region.backward(x, tp, "m2.rs"), want_gather,
                 "RS backward");

    Tensor rows({4, 4});  // row i filled with i, on every rank
    for (int64_t i = 0; i < 16; ++i) rows.at(i) = float(i / 4);
    const Tensor want_rs = Tensor::full({1, 4}, 4.f * r);
    expect_equal(gather_from_sequence_parallel_region.backward(rows, tp, "m2.ag"), want_rs, "AG backward");
    expect_equal(reduce_scatter_to_sequence_parallel_region.forward(rows, tp, "m2.rs"), want_rs,
                 "RS forward");
    // The all-gathers and reduce-scatters run along dim 0 (the sequence) on the TP group.
    for (const auto& rec : records_since(tp, 0))
      if (rec.op == OpKind::all_gather || rec.op == OpKind::reduce_scatter)
        expect(rec.dim == 0 && rec.group == "tp", "SP collective '" + rec.label + "' along dim " +
                                                      std::to_string(rec.dim) + " on group " + rec.group);
  });
}

TEST_CASE("case M3: scatter's backward is a gather (sequence and last dim)") {
  run_case(2, [](int) {
    ParallelState ps(comm::init_from_env(), 2);
    comm::ProcessGroup& tp = ps.tp();
    const int r = tp.rank();
    // tp=2, x = [x0, x1] replicated, y = x[r] on rank r, loss = w0·y0 + w1·y1 → dL/dx = [w0, w1].
    const Tensor x = Tensor::from({2}, {0.375f, -1.75f});
    const Tensor w = Tensor::from({2}, {2.5f, -0.75f});
    const Tensor y = scatter_to_sequence_parallel_region.forward(x, tp, "m3.scatter");
    expect_equal(y, Tensor::from({1}, {x.at(r)}), "scatter forward");
    const std::size_t before = tp.recorder().size();
    const Tensor dx =
        scatter_to_sequence_parallel_region.backward(Tensor::from({1}, {w.at(r)}), tp, "m3.scatter");
    expect_equal(dx, w, "scatter backward (the full gradient on every rank, not a zero-padded slice)");
    const auto recs = records_since(tp, before);
    expect(recs.size() == 1 && recs[0].op == OpKind::all_gather,
           "scatter backward must be exactly one all-gather");

    // The same kind on [s, b, h] = [4, 2, 3] and on the last dim (scatter_to_tensor_model_parallel_region).
    const Tensor big = pattern({4, 2, 3}, 7), dbig = pattern({4, 2, 3}, 8);
    expect_equal(scatter_to_sequence_parallel_region.backward(dbig.slice0(2 * r, 2 * r + 2), tp, "m3.s3"),
                 dbig, "scatter backward on [4, 2, 3]");
    const Tensor d_last = pattern({3, 4}, 9);
    expect_equal(
        scatter_to_tensor_model_parallel_region.backward(d_last.narrow_copy(1, 2 * r, 2), tp, "m3.l"), d_last,
        "last-dim scatter backward");
  });
}

namespace {
/// M4 at the mapping level: every dim-0 split of s=3 over tp=2 raises a ShapeError naming s=3
/// and tp=2, and no collective was issued by any of them (the recorder is unchanged).
void check_indivisible_mappings(comm::ProcessGroup& world, comm::ProcessGroup& tp) {
  const Tensor x = pattern({3, 1, 4}, 1);
  const std::vector<std::string> names = {"s=3", "tp=2"};
  const std::size_t before = world.recorder().size();
  expect_throws([&] { scatter_to_sequence_parallel_region.forward(x, tp, "m4"); }, names, "SP scatter fwd");
  expect_throws([&] { reduce_scatter_to_sequence_parallel_region.forward(x, tp, "m4"); }, names, "SP RS fwd");
  expect_throws([&] { gather_from_sequence_parallel_region.backward(x, tp, "m4"); }, names, "SP AG bwd");
  GatherFromSequenceParallelRegion split_only{.tensor_parallel_output_grad = false};
  expect_throws([&] { split_only.backward(x, tp, "m4"); }, names, "SP AG bwd (split)");
  expect_throws([&] { all_to_all_hp2sp.forward(x, tp, "m4"); }, names, "hp2sp fwd");
  expect_throws([&] { all_to_all_sp2hp.backward(x, tp, "m4"); }, names, "sp2hp bwd");
  // The SP row-parallel linear reduce-scatters its [s, b, out] output.
  RowParallelLinear row(pattern({4, 2}, 2), Tensor(), Tensor(), Tensor(), {.sequence_parallel = true},
                        "m4.row");
  LinearSaved saved;
  expect_throws([&] { row.forward(pattern({3, 1, 2}, 3), saved, tp); }, names, "SP row-parallel fwd");
  expect(world.recorder().size() == before, "a collective was issued before the s=3 / tp=2 error: " +
                                                std::to_string(world.recorder().size() - before) +
                                                " records");
  // Every rank raised at the same points, so the group is still in step: one all-reduce works.
  Tensor one = Tensor::full({1}, 1.f);
  tp.all_reduce(one, comm::ReduceOp::sum, {"m4.after"});
  expect(one.at(0) == 2.f, "the TP group is not usable after the errors");
}
}  // namespace

TEST_CASE("case M4: SP with s=3 at tp=2 raises before any collective (mappings)") {
  run_case(2, [](int) {
    ParallelState ps(comm::init_from_env(), 2);
    check_indivisible_mappings(ps.world(), ps.tp());
  });
}

TEST_CASE("case M4: SP with s=3 at tp=2 raises before any collective (ParallelGPT forward)") {
  run_case(2, [](int) {
    ParallelState ps(comm::init_from_env(), 2);
    GPTConfig c;
    c.vocab = 11;
    c.seq = 4;
    c.hidden = 8;
    c.heads = 2;
    c.layers = 1;
    c.ffn = 16;
    model::ParallelGPT gpt(c, 3, ps, {.sequence_parallel = true});
    TokenBatch ids{1, 3, {1, 2, 3}}, targets{1, 3, {2, 3, 4}};
    const std::size_t before = ps.world().recorder().size();
    expect_throws([&] { gpt.forward(ids, targets); }, {"s=3", "tp=2"}, "ParallelGPT SP forward");
    expect(ps.world().recorder().size() == before, "ParallelGPT issued a collective before the s=3 error");
    // The same model runs at s=4 afterwards (every rank is still in step).
    TokenBatch ids4{1, 4, {1, 2, 3, 4}}, targets4{1, 4, {2, 3, 4, 5}};
    expect(std::isfinite(gpt.forward(ids4, targets4)), "forward at s=4 after the error");
  });
}

TEST_CASE("case M5: SP collectives run on the TP group in a world of dp=2 x tp=2") {
  run_case(4, [](int rank) {
    auto world = comm::init_from_env();
    ParallelState ps(world, 2);
    comm::ProcessGroup& tp = ps.tp();
    const std::size_t before = world->recorder().size();
    // x[i][j] = 100·rank + 10·i + j: a reduce-scatter over the world would add the other replica's
    // 100s. TP group {0,1} sums to 100 + 2(10i + j), {2,3} to 500 + 2(10i + j).
    Tensor x({4, 3});
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 3; ++j) x.at({i, j}) = float(100 * rank + 10 * i + j);
    const int base = rank < 2 ? 100 : 500;
    Tensor want_rs({2, 3});
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j) want_rs.at({i, j}) = float(base + 2 * (10 * (i + 2 * tp.rank()) + j));
    expect_equal(reduce_scatter_to_sequence_parallel_region.forward(x, tp, "m5.rs"), want_rs, "RS forward");
    expect_equal(gather_from_sequence_parallel_region.backward(x, tp, "m5.ag"), want_rs, "AG backward");
    // The all-gather holds the TP group's two shards only.
    const Tensor mine = Tensor::full({1, 3}, float(rank));
    const int first = rank / 2 * 2;
    const Tensor want_ag = Tensor::from({2, 3}, {float(first), float(first), float(first), float(first + 1),
                                                 float(first + 1), float(first + 1)});
    expect_equal(gather_from_sequence_parallel_region.forward(mine, tp, "m5.ag"), want_ag, "AG forward");
    expect_equal(reduce_scatter_to_sequence_parallel_region.backward(mine, tp, "m5.rs"), want_ag,
                 "RS backward");
    expect_equal(scatter_to_sequence_parallel_region.backward(mine, tp, "m5.sc"), want_ag,
                 "scatter backward");
    for (const auto& r : records_since(*world, before))
      expect(r.group == "tp" && r.group_size == 2,
             "SP collective '" + r.label + "' ran on group " + r.group + ", want the TP group of 2");

    // The whole model: with SP at dp=2 × tp=2, every AG/RS/all-to-all is on the TP group and
    // nothing at all runs on the world group (the DP gradient average runs on "dp").
    GPTConfig c;
    c.vocab = 13;
    c.seq = 4;
    c.hidden = 8;
    c.heads = 2;
    c.layers = 1;
    c.ffn = 16;
    model::ParallelGPT gpt(c, 5, ps, {.sequence_parallel = true});
    TokenBatch ids, targets;
    testing::make_batch(1, 4, c.vocab, 1 + ps.dp_rank(), ids, targets);
    const std::size_t start = world->recorder().size();
    gpt.forward(ids, targets);
    gpt.backward();
    std::size_t sp_calls = 0;
    for (const auto& r : records_since(*world, start)) {
      expect(r.group != "world", "ParallelGPT ran '" + r.label + "' on the world group");
      if (r.op == OpKind::all_gather || r.op == OpKind::reduce_scatter || r.op == OpKind::all_to_all) {
        ++sp_calls;
        expect(r.group == "tp", "SP collective '" + r.label + "' ran on group " + r.group);
      }
    }
    expect(sp_calls > 0, "the SP model made no all-gather / reduce-scatter");
  });
}
