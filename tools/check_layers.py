#!/usr/bin/python3
"""Checks the engine's layering (docs/architecture.md, "Layers of the engine"): every
`#include "engine/..."` in engine/ goes to a room of the same layer or a lower one, and no two units
include each other in a loop (a unit is a file stem: foo.h and foo.cpp are one unit).

    /usr/bin/python3 tools/check_layers.py [ROOT]     # exit 0 when the engine keeps its layers

A file's room is the longest prefix of LAYERS that its path starts with; a file that matches none is
an error (a new room must be placed in the table). Prints every violation, one a line, and exits 1.
"""

import os
import re
import sys

# (path prefix, layer): low layers first. A room may include its own layer and the layers below.
LAYERS = [
    # 0 base: errors, element types and devices, bf16, the lab TODO marker, token batches
    ("engine/error.h", 0), ("engine/bf16.h", 0), ("engine/host_device.h", 0), ("engine/device.", 0),
    ("engine/lab_todo.", 0), ("engine/tokens.", 0),
    # 1 storage: tensors and their device hooks, packed sequences, random generators, .npy files
    ("engine/tensor.", 1), ("engine/device_hooks.", 1), ("engine/packed_seq.", 1), ("engine/random/", 1),
    ("engine/io/", 1),
    # 2 trace: the recorder of calls and compute spans, the call kinds
    ("engine/trace/", 2),
    # 3 ops (public headers, rules, dispatch) and comm (process groups, work, the backend interface)
    ("engine/ops/", 3), ("engine/comm/", 3),
    # 4 kernels of each device and the transports of comm
    ("engine/ops/cpu/", 4), ("engine/ops/cuda/", 4), ("engine/comm/gloo/", 4), ("engine/comm/relay/", 4),
    ("engine/comm/nccl/", 4), ("engine/comm/cuda/", 4),
    # 5 what picks among those: a transport from the environment, the emulated device, TP groups
    ("engine/comm/env.", 5), ("engine/emulated_device.", 5), ("engine/parallel_state.", 5),
    ("engine/placement.", 5),
    # 6 the device runtime, the tensor-parallel layers and the MoE layer's parts; 7 the model and training
    ("engine/runtime/", 6), ("engine/tensor_parallel/", 6), ("engine/moe/", 6),
    ("engine/model/", 7), ("engine/train/", 7),
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"(engine/[^"]+)"', re.M)


def room(path):
    best = None
    for prefix, layer in LAYERS:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer)
    return best


def unit(path):
    return os.path.splitext(path)[0]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    errors = []
    edges = {}
    for d, _, files in os.walk(os.path.join(root, "engine")):
        for f in sorted(files):
            if not f.endswith((".h", ".cpp", ".cu")):
                continue
            path = os.path.relpath(os.path.join(d, f), root)
            src = room(path)
            if src is None:
                errors.append(f"{path}: in no room of tools/check_layers.py LAYERS (add its room)")
                continue
            with open(os.path.join(root, path), encoding="utf-8") as fh:
                for inc in INCLUDE.findall(fh.read()):
                    dst = room(inc)
                    if dst is None:
                        errors.append(f"{path}: includes {inc}, which is in no room")
                    elif dst[1] > src[1]:
                        errors.append(f"{path} (layer {src[1]}, {src[0]}) includes {inc} "
                                      f"(layer {dst[1]}, {dst[0]}): an arrow up")
                    if unit(inc) != unit(path):
                        edges.setdefault(unit(path), set()).add(unit(inc))
    errors += cycles(edges)
    for e in errors:
        print(e)
    print(f"engine layering: {len(errors)} violation(s)")
    return 1 if errors else 0


def cycles(edges):
    """One line per include loop between units (Tarjan's strongly connected components)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append("include loop: " + " -> ".join(sorted(comp)))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main())
