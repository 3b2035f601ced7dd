#!/usr/bin/env bash
# Session 10, call 3 (branch lab-fa-unroll: the flash kernel's d-loop kept rolled in steps of 4 with
# [[dont_unroll]], the P·V key loop [[dont_unroll]]): do tiles of 4-8 rows per invocation stop
# spilling on NVIDIA's compiler, and what do they run at? Usage on the device: bash lab/h200-s10c.sh
set -u
. lab/tile-bench.sh
t default
t a128-32-4-2-00 ROCKY_ATTN_TILE=128,32,4,2,0,0
t a64-32-8-2-00 ROCKY_ATTN_TILE=64,32,8,2,0,0
t a256-32-4-2-01 ROCKY_ATTN_TILE=256,32,4,2,0,1
t a128-32-4-4-01 ROCKY_ATTN_TILE=128,32,4,4,0,1
t a512-32-2-2-11 ROCKY_ATTN_TILE=512,32,2,2,1,1
python3 lab/bench_table.py "$O" "${names[@]}"
sed -e 's/ Binary Size=[0-9]*//; s/ Stack Size=0//' "$O/pstats.txt" | cut -c1-200
