#!/usr/bin/env bash
# Session 10, call 4 (branch lab-fa-unroll): 4 rows × 2 keys per invocation with f16 staging at -r 2,
# with and without prefetch, and 16 rows per workgroup. Usage on the device: bash lab/h200-s10d.sh
set -u
. lab/tile-bench.sh
b t256-32-4-2-01 ROCKY_ATTN_TILE=256,32,4,2,0,1
b t256-32-4-2-11 ROCKY_ATTN_TILE=256,32,4,2,1,1
b t128-16-4-2-01 ROCKY_ATTN_TILE=128,16,4,2,0,1
ROCKY_PIPELINE_STATS=attention_flash ROCKY_ATTN_TILE=256,32,4,2,1,1 timeout 60 $R bench -m $M -p 1024 -n 0 -ub 512 -r 1 --no-roofline -o json 2>&1 > /dev/null | grep -a "^pipeline" | sed -e 's/ Binary Size=[0-9]*//' | cut -c1-200
ROCKY_PIPELINE_STATS=attention_flash ROCKY_ATTN_TILE=128,16,4,2,0,1 timeout 60 $R bench -m $M -p 1024 -n 0 -ub 512 -r 1 --no-roofline -o json 2>&1 > /dev/null | grep -a "^pipeline" | sed -e 's/ Binary Size=[0-9]*//' | cut -c1-200
ROCKY_ATTN_TILE=256,32,4,2,0,1 timeout 90 $R bench -m $M -p 4096 -n 0 -ub 512 -r 1 --no-roofline --profile -o json > "$O/prof.json" 2> "$O/prof.err"
python3 lab/bench_table.py "$O" "${names[@]}"
python3 lab/bench_table.py "$O" --prof prof | cut -c1-200
