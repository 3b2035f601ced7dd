#!/usr/bin/env bash
# Session 8, call 3: tiles that keep one vec4 of O per invocation (32 column threads) but more
# rows per invocation or per workgroup — is the slowdown of #38 tied to CT < 32?
# Usage on the device: bash lab/h200-s8c.sh (prints a table last).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=".devpack/run rocky"; M=/tmp/q3b.gguf
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
names=()
b() {
  local name=$1; shift; names+=("$name" "$name-d")
  timeout 60 env "$@" $R bench -m $M -p 4096 -n 0 -ub 512 -r 2 --no-roofline -o json > "$O/$name.json" 2> "$O/$name.err" || echo "$name failed: $(tail -2 "$O/$name.err")"
  timeout 60 env "$@" $R bench -m $M -p 512 -n 0 -d 8192 -ub 512 -r 2 --no-roofline -o json > "$O/$name-d.json" 2> "$O/$name-d.err" || echo "$name-d failed: $(tail -2 "$O/$name-d.err")"
}
b default
b t128-32-8-2ph ROCKY_ATTN_TILE=128,32,8,2,1,1
b t256-32-4-2ph ROCKY_ATTN_TILE=256,32,4,2,1,1
b t256-16-2-2ph ROCKY_ATTN_TILE=256,16,2,2,1,1
b t128-16-4-2h ROCKY_ATTN_TILE=128,16,4,2,0,1
python3 lab/bench_table.py "$O" "${names[@]}"
