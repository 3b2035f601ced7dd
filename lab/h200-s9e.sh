#!/usr/bin/env bash
# Session 9, call 5: [N7] the int8-dot matvec's shape for batched decode steps — `-npl 1,4` with
# ROCKY_MMV_SHAPE=WG,ROWS,SPLIT,UNROLL overrides (every matvec of the step takes the shape; with
# 4 columns ROWS ≤ WG / 4). Usage on the device: bash lab/h200-s9e.sh
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=".devpack/run rocky"; M=/tmp/q3b.gguf
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
names=()
n() {
  local name=$1; shift; names+=("$name")
  timeout 90 env "$@" $R bench -m $M -p 512 -n 64 -npl 1,4 -ub 512 -r 2 --no-roofline -o json > "$O/$name.json" 2> "$O/$name.err" || echo "$name failed: $(tail -2 "$O/$name.err")"
}
n default
n s32-8 ROCKY_MMV_SHAPE=32,8,0,2
n s32-2 ROCKY_MMV_SHAPE=32,2,0,2
n s64-4 ROCKY_MMV_SHAPE=64,4,0,2
n s64-8 ROCKY_MMV_SHAPE=64,8,0,2
n s16-4 ROCKY_MMV_SHAPE=16,4,0,2
n s128-4 ROCKY_MMV_SHAPE=128,4,0,2
n default2
python3 lab/bench_table.py "$O" "${names[@]}" | grep -v "pp512 |"
