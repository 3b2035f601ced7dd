#!/usr/bin/env bash
# Session 7, call 6: an agent's next message at depth (pp16 / pp50 @ d5000) — the split flash kernel's
# tiles, no split, and attention_decode for short ubatches (ROCKY_ATTN=decode, ≤ 64 tokens).
# Usage on the device: bash lab/h200-s7e.sh (prints a table last).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=".devpack/run rocky"; M=/tmp/q3b.gguf
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
b() { local name=$1; shift; timeout 100 env "$@" $R bench -m $M -p 16,50 -n 0 -d 5000 -ub 512 -r 2 --no-roofline -o json > "$O/$name.json" 2> "$O/$name.err" || echo "$name failed"; }
b default
b decode ROCKY_ATTN=decode
b decode64 ROCKY_ATTN=decode ROCKY_ATTN_SPLIT=64
b tile64 ROCKY_ATTN_TILE=64,8,1,1,1
b tile128 ROCKY_ATTN_TILE=128,16,1,2,1
b nosplit ROCKY_ATTN_SPLIT=0
timeout 100 env ROCKY_ATTN=decode $R bench -m $M -p 50 -n 0 -d 5000 -ub 512 -r 1 --no-roofline --profile -o json > "$O/prof.json" 2> "$O/prof.err"
python3 lab/bench_table.py "$O" default decode decode64 tile64 tile128 nosplit --ms --prof prof
