#!/usr/bin/env bash
# Session 9, call 6: NVIDIA's matvec shape for 2 … 8 columns (cols 32 × 2) as the default:
# -npl 1,2,4,8 (twice), short ubatches at depth (their columns take the same kernel) and pp512 / tg128;
# the old shape is call 5's default rows (lab/h200-s9e.sh) and call 1's short rows.
# Usage on the device: bash lab/h200-s9f.sh
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=".devpack/run rocky"; M=/tmp/q3b.gguf
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
timeout 120 $R bench -m $M -p 512 -n 64 -npl 1,2,4,8 -ub 512 -r 2 --no-roofline -o json > "$O/npl.json" 2> "$O/npl.err"
timeout 60 $R bench -m $M -p 16,50,186 -n 0 -d 5000 -ub 512 -r 2 --no-roofline -o json > "$O/short.json" 2> "$O/short.err"
timeout 60 $R bench -m $M -p 512 -n 128 -ub 512 -r 2 --no-roofline -o json > "$O/base.json" 2> "$O/base.err"
timeout 120 $R bench -m $M -p 512 -n 64 -npl 1,4 -ub 512 -r 2 --no-roofline -o json > "$O/npl-b.json" 2> "$O/npl-b.err"
python3 lab/bench_table.py "$O" npl short base npl-b --ms
