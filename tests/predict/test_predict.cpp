// Issue 14, "predict the communication": each lab's right prediction (tests/predict/answers/) is
// right; each wrong one of checkers/mutants/predict/ is told apart with its explanation (its first
// line "# expect: TEXT" names it); the shipped templates are "not filled in yet"; bad lines are
// named with their line and rule.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkers/grader/prediction.h"
#include "checkers/predict/predict.h"

using namespace tpsp::checkers;
using namespace tpsp::checkers::predict;
namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE_MESSAGE(in, "cannot read " << p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string joined(const Outcome& o) {
  std::string s;
  for (const std::string& l : o.report) s += l + "\n";
  return s;
}

const std::string kSource = TPSP_SOURCE_DIR;

}  // namespace

TEST_CASE("each lab's right prediction is right, every line marked") {
  for (const std::string& lab : step_labs()) {
    const Step& step = step_of(lab);
    const Outcome o = check_prediction(read(kSource + "/tests/predict/answers/" + lab + ".txt"), step);
    INFO(lab << "\n" << joined(o));
    CHECK(o.status == Outcome::Status::right);
    CHECK(o.right == static_cast<int>(step.calls.size()));
    CHECK(o.differences == 0);
    CHECK(o.summary() ==
          std::to_string(step.calls.size()) + " of " + std::to_string(step.calls.size()) + " calls right");
  }
}

TEST_CASE("every prediction mutant is rejected with its explanation") {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(kSource + "/checkers/mutants/predict")) {
    const std::string name = entry.path().stem().string();
    const std::string text = read(entry.path());
    const std::string first = text.substr(0, text.find('\n'));
    REQUIRE_MESSAGE(first.rfind("# expect: ", 0) == 0, name << ": the first line must be '# expect: TEXT'");
    const std::string expect = first.substr(10);
    const Outcome o = check_prediction(text, step_of(name.substr(0, 5)));
    INFO(name << "\n" << joined(o));
    CHECK(o.status == Outcome::Status::differs);
    CHECK(o.differences > 0);
    CHECK(joined(o).find(expect) != std::string::npos);
    ++n;
  }
  CHECK(n >= 18);
}

TEST_CASE("the shipped templates are not filled in, and a normal check says so in one line") {
  for (const std::string& lab : step_labs()) {
    const std::string path = prediction_path(kSource, lab);
    REQUIRE_MESSAGE(!path.empty(), lab);
    const Outcome o = check_prediction(read(path), step_of(lab));
    INFO(lab << "\n" << joined(o));
    CHECK(o.status == Outcome::Status::unfilled);
    CHECK(o.summary() == "not filled in yet");
    const std::string line = prediction_summary(kSource, lab);
    CHECK(line.find("prediction " + lab + ": not filled in yet") == 0);
    CHECK(line.find("./check " + lab + " --predict") != std::string::npos);
    // The template names exactly the step's phases.
    std::string phases;
    for (const std::string& p : step_of(lab).phases) phases += (phases.empty() ? "" : ", ") + p;
    CHECK(read(path).find(phases) != std::string::npos);
  }
}

TEST_CASE("a wrong phase, op, byte count, a missing and an extra call: one numbered difference each") {
  const Step& step = step_of("lab01");
  const Outcome o = check_prediction(
      "backward all_reduce tp dim=- bytes=1MiB\n"  // line 1: g's all-reduce in the wrong phase
      "backward all_gather tp dim=0 bytes=1MiB\n"  // line 2: extra
      "backward all_reduce tp dim=- bytes=1MiB\n",
      step);
  INFO(joined(o));
  CHECK(o.status == Outcome::Status::differs);
  CHECK(o.right == 1);
  CHECK(o.differences == 2);
  CHECK(o.summary() == "1 of 2 calls right, 2 differences");
  REQUIRE(o.report.size() == 3);
  CHECK(o.report[0].rfind("✗ 1. line 1: you predicted all_reduce of 1 MiB in backward. The step makes this "
                          "all_reduce in FORWARD, not in backward. The call: `forward all_reduce tp dim=- "
                          "bytes=1048576` — the output Y [512, 2, 256] f32 (1 MiB): g = "
                          "reduce_from_tensor_model_parallel_region",
                          0) == 0);
  CHECK(o.report[1].rfind("✗ 2. line 2: extra: the step makes no call `backward all_gather tp dim=0 "
                          "bytes=1048576` — without SP nothing is gathered",
                          0) == 0);
  CHECK(o.report[2].rfind("✓ line 3: backward all_reduce tp dim=- bytes=1048576", 0) == 0);

  const Outcome tp2 =
      check_prediction("forward all_reduce tp bytes=2MiB\nbackward all_reduce tp bytes=1MiB\n", step);
  CHECK(joined(tp2).find("bytes=2097152 (2 MiB) is 2× the call's tensor: bytes= counts the tensor once") !=
        std::string::npos);
  const Outcome none = check_prediction("# nothing yet\n\n   # still nothing\n", step);
  CHECK(none.status == Outcome::Status::unfilled);
  const Outcome missing_all = check_prediction("forward all_reduce tp bytes=1MiB\n", step);
  CHECK(missing_all.report.back().find("missing after line 1: the step makes `backward all_reduce") !=
        std::string::npos);
}

TEST_CASE("bad lines are named with their line and the rule they break, and nothing is compared") {
  const Step& step = step_of("lab01");
  struct Bad {
    const char* line;
    const char* error;
  };
  const Bad cases[] = {
      {"fwd all_reduce tp bytes=4",
       "line 2: phase 'fwd' is not one of this step's phases: forward, backward"},
      {"forward allreduce2 tp bytes=4", "line 2: op 'allreduce2' is not a collective"},
      {"forward all_reduce model bytes=4",
       "line 2: group 'model' is not one of tp, dp, world, ep, etp, tp_ep, edp"},
      {"forward all_reduce", "line 2: a call is PHASE OP GROUP dim=D bytes=N"},
      {"forward all_reduce tp", "line 2: bytes= is missing"},
      {"forward all_reduce tp bytes=2MB", "line 2: bytes=2MB: MB is ambiguous"},
      {"forward all_reduce tp bytes=1.5MiB", "line 2: bytes=1.5MiB: '1.5' is not a whole number"},
      {"forward all_reduce tp bytes=0", "line 2: bytes=0: a call moves a tensor of at least 1 byte"},
      {"forward all_reduce tp dim=0 bytes=4", "line 2: dim=0: all_reduce has no dim"},
      {"forward all_gather tp bytes=4", "line 2: all_gather needs dim=D"},
      {"forward all_gather tp dim=x bytes=4", "line 2: dim=x: a dim is 0, 1, 2"},
      {"forward all_gather tp dim=0 bytes=4 reduce=max", "line 2: reduce=max: all_gather does not reduce"},
      {"forward all_reduce tp bytes=4 reduce=avg",
       "line 2: reduce=avg: the engine's reductions are sum and max"},
      {"forward send tp bytes=4", "line 2: send needs peer=P"},
      {"forward recv tp bytes=4 peer=2", "line 2: peer=2: a group rank is 0 … 1"},
      {"forward all_reduce tp bytes=4 peer=1", "line 2: peer=1: all_reduce has no peer"},
      {"forward all_reduce tp bytes=4 size=3", "line 2: 'size' is not a field"},
      {"forward all_reduce tp bytes=4 bytes=8", "line 2: bytes= is given twice"},
      {"forward all_reduce tp bytes", "line 2: 'bytes' is not KEY=VALUE"},
  };
  for (const Bad& b : cases) {
    const Outcome o = check_prediction(std::string("# my prediction\n") + b.line + "  # a comment\n", step);
    INFO(b.line << "\n" << joined(o));
    CHECK(o.status == Outcome::Status::bad_lines);
    REQUIRE(o.report.size() == 1);
    CHECK(o.report[0].find(b.error) != std::string::npos);
  }
}

TEST_CASE("bytes= as an integer, a product or with a unit, and NCCL op names") {
  const Step& step = step_of("lab01");
  for (const char* bytes : {"1048576", "512*2*256*4", "1MiB", "1024KiB", "2*512KiB", "1048576B"}) {
    const Outcome o = check_prediction(
        std::string("forward ncclAllReduce tp bytes=") + bytes + "\nbackward AllReduce tp dim=- bytes=1MiB\n",
        step);
    INFO(bytes << "\n" << joined(o));
    CHECK(o.status == Outcome::Status::right);
  }
  CHECK(human_bytes(1048576) == "1 MiB");
  CHECK(human_bytes(4096) == "4 KiB");
  CHECK(human_bytes(100) == "100 B");
}
