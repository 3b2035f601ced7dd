#!/usr/bin/env bash
# Session 9, call 3: [N3]'s prefix-cache lab after the widened warm-up (short ubatches at depth
# 1280) and the read-ahead of cached blocks (4 lookups in flight), with 256- and 64-token blocks.
# Usage on the device: bash lab/h200-s9c.sh
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=".devpack/run rocky"; M=/tmp/q3b.gguf
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
ln -sf $M /tmp/qwen2.5-3b-q4_k_m.gguf
cp lab/h200-prefix-cache.sh .devpack/
OUT=$O timeout 240 .devpack/h200-prefix-cache.sh > "$O/prefix.txt" 2>&1
OUT=$O SERVE_FLAGS="--cache-block 64" timeout 240 .devpack/h200-prefix-cache.sh > "$O/prefix64.txt" 2>&1
tail -19 "$O/prefix.txt"
tail -19 "$O/prefix64.txt"
