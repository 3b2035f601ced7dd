#!/usr/bin/env bash
# Session 7, call 4: main after attention_decode and the allocation-free decode loop.
#  1. lab/h200-serve.sh: bench pp512/tg128, [N2] TTFT / gap with the server's eval split;
#  2. lab/h200-prefix-cache.sh: [N3] cold / warm / RAM / restart;
#  3. bench -p 512,4096 -n 128 -d 0,8192 (-r 2): [N5]'s rows; -npl 1,2,4,8 (-r 2): [N7].
# Usage on the device: bash lab/h200-s7c.sh (prints tables last).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=".devpack/run rocky"; M=/tmp/q3b.gguf
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
ln -sf $M /tmp/qwen2.5-3b-q4_k_m.gguf
OUT=$O bash lab/h200-serve.sh > "$O/serve.txt" 2>&1 || echo "serve lab failed"
cp lab/h200-prefix-cache.sh .devpack/ && OUT=$O timeout 200 .devpack/h200-prefix-cache.sh > "$O/prefix.txt" 2>&1 || echo "prefix lab failed"
timeout 150 $R bench -m $M -p 512,4096 -n 128 -d 0,8192 -ub 512 -r 2 --no-roofline -o json > "$O/depth.json" 2> "$O/depth.err" || echo "bench -d failed"
timeout 120 $R bench -m $M -p 512 -n 64 -npl 1,2,4,8 -ub 512 -r 2 --no-roofline -o json > "$O/npl.json" 2> "$O/npl.err" || echo "bench -npl failed"
tail -9 "$O/serve.txt"; tail -8 "$O/prefix.txt"
python3 lab/bench_table.py "$O" depth npl
