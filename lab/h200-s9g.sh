#!/usr/bin/env bash
# Session 9, call 7: [N7] the column shape of matvec_q8 (ROCKY_MMV_COLS_SHAPE=WG,ROWS) around the
# new default 32,2: -npl 1,4 and pp16 / pp50 @ d5000. Usage on the device: bash lab/h200-s9g.sh
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=".devpack/run rocky"; M=/tmp/q3b.gguf
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
names=()
n() {
  local name=$1; shift; names+=("$name" "$name-s")
  timeout 90 env "$@" $R bench -m $M -p 512 -n 64 -npl 1,4 -ub 512 -r 2 --no-roofline -o json > "$O/$name.json" 2> "$O/$name.err" || echo "$name failed: $(tail -2 "$O/$name.err")"
  timeout 60 env "$@" $R bench -m $M -p 16,50 -n 0 -d 5000 -ub 512 -r 2 --no-roofline -o json > "$O/$name-s.json" 2> "$O/$name-s.err" || echo "$name-s failed"
}
n default
n c32-1 ROCKY_MMV_COLS_SHAPE=32,1
n c64-2 ROCKY_MMV_COLS_SHAPE=64,2
n c16-2 ROCKY_MMV_COLS_SHAPE=16,2
n c64-1 ROCKY_MMV_COLS_SHAPE=64,1
n c32-4 ROCKY_MMV_COLS_SHAPE=32,4
python3 lab/bench_table.py "$O" "${names[@]}" --ms | grep -v "pp512 |\|tg64"
