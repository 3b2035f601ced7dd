#!/usr/bin/env bash
# Session 9, call 4: [N5] flash tiles under the 128-register budget and a wider split grid for the
# 512-invocation tile (pp4096, pp512 @ d8192), their pipeline statistics; [N7] the per-op GPU time
# of a decode step with 1 and 4 sequences (`--profile`). Usage on the device: bash lab/h200-s9d.sh
set -u
. lab/tile-bench.sh
b default
b fa528 ROCKY_ATTN_FA_GRID=270336
b fa1056 ROCKY_ATTN_FA_GRID=540672
b t1024-32-1-2 ROCKY_ATTN_TILE=1024,32,1,2,1,1
b t256-32-4-2 ROCKY_ATTN_TILE=256,32,4,2,1,1
b t512-32-2-2-nopf ROCKY_ATTN_TILE=512,32,2,2,0,1
for t in 1024,32,1,2,1,1 256,32,4,2,1,1 512,32,2,2,0,1; do
  echo "tile $t" >> "$O/pstats.txt"
  ROCKY_PIPELINE_STATS=attention_flash ROCKY_ATTN_TILE=$t timeout 60 $R bench -m $M -p 1024 -n 0 -ub 512 -r 1 --no-roofline -o json 2>&1 > /dev/null | grep -a "^pipeline\|rocky: error" >> "$O/pstats.txt"
done
timeout 90 $R bench -m $M -p 512 -n 16 -npl 1 -ub 512 -r 1 --no-roofline --profile -o json > "$O/npl1.json" 2> "$O/npl1.err"
timeout 90 $R bench -m $M -p 512 -n 16 -npl 4 -ub 512 -r 1 --no-roofline --profile -o json > "$O/npl4.json" 2> "$O/npl4.err"
python3 lab/bench_table.py "$O" "${names[@]}" --ms
python3 lab/bench_table.py "$O" npl1 npl4 --prof npl1 npl4 | head -60
cut -c1-400 "$O/pstats.txt"
