#!/usr/bin/env bash
# Session 8, call 2: lab/h200-s8a.sh's tiles again with the flash kernel's register loops marked
# [[unroll]] (call 1: every tile with more than one vec4 of O per invocation ran 2–3× slower).
# Usage on the device: bash lab/h200-s8b.sh (prints a table last).
set -u
. lab/tile-bench.sh
b default
b def-kvh ROCKY_ATTN_TILE=128,16,4,2,1,1
b t64-32-4-4 ROCKY_ATTN_TILE=64,32,4,4,0
b t64-32-4-8ph ROCKY_ATTN_TILE=64,32,4,8,1,1
b t64-32-4-8h ROCKY_ATTN_TILE=64,32,4,8,0,1
b t128-32-4-4ph ROCKY_ATTN_TILE=128,32,4,4,1,1
b t128-32-2-4ph ROCKY_ATTN_TILE=128,32,2,4,1,1
b t64-16-2-4ph ROCKY_ATTN_TILE=64,16,2,4,1,1
b t128-16-2-4ph ROCKY_ATTN_TILE=128,16,2,4,1,1
b t64-32-4-8ph-g128k ROCKY_ATTN_TILE=64,32,4,8,1,1 ROCKY_ATTN_FA_GRID=131072
b t128-32-4-4ph-g128k ROCKY_ATTN_TILE=128,32,4,4,1,1 ROCKY_ATTN_FA_GRID=131072
timeout 60 env ROCKY_ATTN_TILE=64,32,4,8,1,1 $R bench -m $M -p 4096 -n 0 -ub 512 -r 1 --no-roofline --profile -o json > "$O/prof-new.json" 2> /dev/null
timeout 60 $R bench -m $M -p 16,50 -n 0 -d 5000 -ub 512 -r 2 --no-roofline -o json > "$O/short.json" 2> "$O/short.err"
python3 lab/bench_table.py "$O" "${names[@]}" short --prof prof-new
