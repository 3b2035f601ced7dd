#!/usr/bin/env bash
# Session 9, call 2: where a served request's prefill time goes — timings.prompt_gpu_ms (GPU
# timestamps at each command buffer's start and end) against prompt_ms, in [N2]'s serve lab (with
# the SM clock during bench) and [N3]'s prefix-cache lab. Usage on the device: bash lab/h200-s9b.sh
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=".devpack/run rocky"; M=/tmp/q3b.gguf
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
ln -sf $M /tmp/qwen2.5-3b-q4_k_m.gguf
OUT=$O REPS=2 timeout 200 bash lab/h200-serve.sh > "$O/serve.txt" 2>&1
cp lab/h200-prefix-cache.sh .devpack/ && OUT=$O timeout 240 .devpack/h200-prefix-cache.sh > "$O/prefix.txt" 2>&1
tail -9 "$O/serve.txt"
tail -18 "$O/prefix.txt"
