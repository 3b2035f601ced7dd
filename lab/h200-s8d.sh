#!/usr/bin/env bash
# Session 8, call 4: the new NVIDIA default flash tile (256,16,2,2,1,1) as a default: pp512 / tg128,
# pp4096, pp512 @ d8192, pp16 / pp50 @ d5000, two neighbours, and the profile of pp4096.
# Usage on the device: bash lab/h200-s8d.sh (prints a table last).
set -u
. lab/tile-bench.sh
b default
b t256-16-2-2-nopf ROCKY_ATTN_TILE=256,16,2,2,0,1
b t256-8-1-2ph ROCKY_ATTN_TILE=256,8,1,2,1,1
b t512-32-2-2ph ROCKY_ATTN_TILE=512,32,2,2,1,1
timeout 60 $R bench -m $M -p 512 -n 128 -ub 512 -r 2 --no-roofline -o json > "$O/base.json" 2> "$O/base.err"
timeout 60 $R bench -m $M -p 16,50 -n 0 -d 5000 -ub 512 -r 2 --no-roofline -o json > "$O/short.json" 2> "$O/short.err"
timeout 60 $R bench -m $M -p 4096 -n 0 -ub 512 -r 1 --no-roofline --profile -o json > "$O/prof.json" 2> /dev/null
python3 lab/bench_table.py "$O" "${names[@]}" base short --ms --prof prof
