#!/usr/bin/env bash
# Session 8, call 1: [N5] prefill flash-attention tiles — bigger register tiles (32 rows, 4 × 4 and
# 4 × 8 scores), K/V blocks as f16 in shared memory (KVH), P read 4 keys per load, and the split of
# the prefill grid (ROCKY_ATTN_FA_GRID, invocations). pp4096 and pp512 @ d8192, t/s.
# Usage on the device: bash lab/h200-s8a.sh (prints a table last).
set -u
. lab/tile-bench.sh
b default
b def-kvh ROCKY_ATTN_TILE=128,16,4,2,1,1
b t64-32-4-4 ROCKY_ATTN_TILE=64,32,4,4,0
b t64-32-4-4p ROCKY_ATTN_TILE=64,32,4,4,1
b t64-32-4-8h ROCKY_ATTN_TILE=64,32,4,8,0,1
b t64-32-4-8ph ROCKY_ATTN_TILE=64,32,4,8,1,1
b t128-32-2-4ph ROCKY_ATTN_TILE=128,32,2,4,1,1
b t128-32-4-4ph ROCKY_ATTN_TILE=128,32,4,4,1,1
b t256-32-2-4ph ROCKY_ATTN_TILE=256,32,2,4,1,1
b t64-16-2-4ph ROCKY_ATTN_TILE=64,16,2,4,1,1
b t64-32-4-4p-g128k ROCKY_ATTN_TILE=64,32,4,4,1 ROCKY_ATTN_FA_GRID=131072
b t64-32-4-8ph-g128k ROCKY_ATTN_TILE=64,32,4,8,1,1 ROCKY_ATTN_FA_GRID=131072
b default-g128k ROCKY_ATTN_FA_GRID=131072
timeout 60 $R bench -m $M -p 4096 -n 0 -ub 512 -r 1 --no-roofline --profile -o json > "$O/prof-def.json" 2> /dev/null
timeout 60 env ROCKY_ATTN_TILE=64,32,4,8,1,1 $R bench -m $M -p 4096 -n 0 -ub 512 -r 1 --no-roofline --profile -o json > "$O/prof-new.json" 2> /dev/null
python3 lab/bench_table.py "$O" "${names[@]}" --prof prof-def prof-new
