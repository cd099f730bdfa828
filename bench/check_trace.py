#!/usr/bin/python3
"""Checks that DIR/rank0.json and DIR/rank1.json (bench_gpt_step --tp 2 --sp --layers 1 --trace) hold
what make timeline's layer figure shows: the spans layer.forward and layer.backward of
decoder.layers.0, GEMMs inside them, and the layer's sequence-parallel calls in the engine's order
(forward: all-gather before QKV and fc1, reduce-scatter after proj and fc2; backward: the conjugates
in reverse, with the two wgrad re-gathers of the QKV and fc1 inputs; engine/model/capacity.h). Prints what it found; exits 1 naming the first difference.
Usage: check_trace.py DIR"""
import json
import sys

FORWARD = ["all_gather self_attention.linear_qkv.ag", "reduce_scatter self_attention.linear_proj.rs",
           "all_gather mlp.linear_fc1.ag", "reduce_scatter mlp.linear_fc2.rs"]
BACKWARD = ["all_gather mlp.linear_fc2.rs", "all_gather mlp.linear_fc1.ag_wgrad", "reduce_scatter mlp.linear_fc1.ag",
            "all_gather self_attention.linear_proj.rs", "all_gather self_attention.linear_qkv.ag_wgrad",
            "reduce_scatter self_attention.linear_qkv.ag"]


def main(d):
    for r in (0, 1):
        events = [e for e in json.load(open(f"{d}/rank{r}.json"))["traceEvents"] if e.get("ph") == "X"]
        spans = {e["name"]: e for e in events if e["cat"] == "compute" and e["name"].startswith("layer.")}
        for name in ("layer.forward decoder.layers.0", "layer.backward decoder.layers.0"):
            if name not in spans:
                sys.exit(f"rank {r}: no span '{name}' (found {sorted(spans)})")
        inside = lambda e, s: s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"]
        layer_calls = {}
        for phase in ("forward", "backward"):
            s = spans[f"layer.{phase} decoder.layers.0"]
            gemms = [e for e in events if e["name"].startswith("gemm") and inside(e, s)]
            if not gemms:
                sys.exit(f"rank {r}: no GEMM inside layer.{phase}")
            calls = sorted((e for e in events if e["cat"] == "comm" and inside(e, s)), key=lambda e: e["ts"])
            layer_calls[phase] = [e["name"].replace("decoder.layers.0.", "") for e in calls]
        if layer_calls["forward"] != FORWARD:
            sys.exit(f"rank {r}: the layer's forward calls are {layer_calls['forward']}, want {FORWARD}")
        if layer_calls["backward"] != BACKWARD:
            sys.exit(f"rank {r}: the layer's backward calls are {layer_calls['backward']}, want {BACKWARD}")
        print(f"rank {r}: forward {layer_calls['forward']}; backward {layer_calls['backward']}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
