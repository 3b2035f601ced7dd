#!/usr/bin/env bash
# Session 10, call 1: [N5] flash tiles with f32 K/V staging (no per-use f16 conversion) and 4-8
# rows x 2 vec4 of O per invocation: registers (ROCKY_PIPELINE_STATS) and pp4096 / pp512 @ d8192
# (-r 1); attention_flash_sg tiles (subgroup row reductions, K and V staged together); the default's --profile of pp4096 (attention ms); [N7] --profile of a decode step with 1
# and 4 sequences at the current defaults. Usage on the device: bash lab/h200-s10a.sh
set -u
. lab/tile-bench.sh
t default
t a64-32-8-2-00 ROCKY_ATTN_TILE=64,32,8,2,0,0
t a128-32-4-2-00 ROCKY_ATTN_TILE=128,32,4,2,0,0
t a256-32-2-2-00 ROCKY_ATTN_TILE=256,32,2,2,0,0
t a64-16-4-2-00 ROCKY_ATTN_TILE=64,16,4,2,0,0
t a64-32-8-2-01 ROCKY_ATTN_TILE=64,32,8,2,0,1
t a64-32-8-4-01 ROCKY_ATTN_TILE=64,32,8,4,0,1
t a512-32-2-1-00 ROCKY_ATTN_TILE=512,32,2,1,0,0
t sg256-16-2-2-11 ROCKY_ATTN_TILE=256,16,2,2,1,1,1
t sg256-16-2-2-01 ROCKY_ATTN_TILE=256,16,2,2,0,1,1
t sg512-32-2-1-11 ROCKY_ATTN_TILE=512,32,2,1,1,1,1
t sg512-16-1-2-11 ROCKY_ATTN_TILE=512,16,1,2,1,1,1
t sg1024-32-1-1-11 ROCKY_ATTN_TILE=1024,32,1,1,1,1,1
timeout 90 $R bench -m $M -p 4096 -n 0 -ub 512 -r 1 --no-roofline --profile -o json > "$O/prof4096.json" 2> "$O/prof4096.err"
timeout 90 $R bench -m $M -p 512 -n 16 -npl 1 -ub 512 -r 1 --no-roofline --profile -o json > "$O/npl1.json" 2> "$O/npl1.err"
timeout 90 $R bench -m $M -p 512 -n 16 -npl 4 -ub 512 -r 1 --no-roofline --profile -o json > "$O/npl4.json" 2> "$O/npl4.err"
python3 lab/bench_table.py "$O" "${names[@]}"
python3 lab/bench_table.py "$O" --prof prof4096 npl1 npl4 | cut -c1-900
sed -e 's/ per stage.*//' "$O/pstats.txt" | cut -c1-220
