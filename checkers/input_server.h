// The relay's side of the checker inputs (checkers/inputs.h): under ./check's relay and ./grade's witness
// the ranks never receive the seed; each input is asked of the relay (protocol Kind::input), which draws
// it from the seed and answers with the part the asking rank may have. The rule is the relay's own and
// keeps no state, so no order of requests, no new world and no group a rank makes can widen it:
//  - whole: any rank gets the whole tensor (inputs every rank holds by design);
//  - split along dim d: world rank w gets chunk w % tp of tp (its TP rank's: the layout's, engine/
//    parallel_state.h), drawn under the split name (it holds the dim and the shape), which no whole
//    request and no request with another shape can reach;
//  - of_rank: world rank w gets "<name>.rank<w % tp>", its own.
// The request names the input and its shape: {"name", "shape": [..], "scale", "exact", "share": "whole" |
// "split" | "of_rank", "dim"}. A request that breaks the protocol (not such an object, a name against
// InputSpec's rule, over 2^22 elements, or past 2^26 elements asked by one rank in one launch) is a violation that fails the run; one the scenario's code got
// wrong (a dim not divisible by tp) is answered with an error.
#pragma once

#include <cstdint>

#include "launch/relay_server.h"

namespace tpsp::checkers {

/// The input server of one launch: inputs drawn from `seed` for a layout of TP groups of `tp` ranks.
run::InputServer input_server(uint64_t seed, int tp);

}  // namespace tpsp::checkers
