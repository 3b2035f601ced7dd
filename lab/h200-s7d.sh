#!/usr/bin/env bash
# Session 7, call 5: [N2] gap after the lane argmax; [N3] where an agent's next message at depth
# goes (bench -p 16,50 -d 5000 and --profile of pp50 @ d5000: GPU ms per op).
# Usage on the device: bash lab/h200-s7d.sh (prints tables last).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=".devpack/run rocky"; M=/tmp/q3b.gguf
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
OUT=$O bash lab/h200-serve.sh > "$O/serve.txt" 2>&1 || echo "serve lab failed"
timeout 150 $R bench -m $M -p 16,50 -n 0 -d 5000 -ub 512 -r 3 --no-roofline -o json > "$O/short.json" 2> "$O/short.err" || echo "bench short failed"
timeout 150 $R bench -m $M -p 50 -n 0 -d 5000 -ub 512 -r 1 --no-roofline --profile -o json > "$O/prof.json" 2> "$O/prof.err" || echo "bench prof failed"
tail -6 "$O/serve.txt"
python3 lab/bench_table.py "$O" short --ms --prof prof
