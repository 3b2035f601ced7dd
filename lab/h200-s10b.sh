#!/usr/bin/env bash
# Session 10, call 2: main's new defaults (NVIDIA flash tile 256,32,2,2,0,0) at -r 2 — pp512, pp4096,
# pp512 @ d8192, tg128, -npl 1,4 — the --profile of pp4096 (attention ms), and two neighbours of the
# tile (prefetch; 512 x 16 rows). Usage on the device: bash lab/h200-s10b.sh
set -u
. lab/tile-bench.sh
b default
b t256-32-2-2-10 ROCKY_ATTN_TILE=256,32,2,2,1,0
b t512-16-1-2-00 ROCKY_ATTN_TILE=512,16,1,2,0,0
timeout 90 $R bench -m $M -p 512 -n 128 -ub 512 -r 2 --no-roofline -o json > "$O/base.json" 2> "$O/base.err"
timeout 120 $R bench -m $M -p 512 -n 64 -npl 1,4 -ub 512 -r 2 --no-roofline -o json > "$O/npl.json" 2> "$O/npl.err"
timeout 90 $R bench -m $M -p 4096 -n 0 -ub 512 -r 1 --no-roofline --profile -o json > "$O/prof4096.json" 2> "$O/prof4096.err"
timeout 90 $R bench -m $M -p 512 -n 0 -d 8192 -ub 512 -r 1 --no-roofline --profile -o json > "$O/profd.json" 2> "$O/profd.err"
timeout 60 $R roofline --reps 3 2>&1 | tail -6
python3 lab/bench_table.py "$O" "${names[@]}" base npl
python3 lab/bench_table.py "$O" --prof prof4096 profd | cut -c1-500
