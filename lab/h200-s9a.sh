#!/usr/bin/env bash
# Session 9, call 1: main's defaults as defaults (NVIDIA's first flash tile 512,32,2,2,1,1 against
# 256,16,2,2,1,1), -npl 1,4, then [N2]'s serve lab (ttft.py with 2 s of back-to-back warm-up
# requests) and [N3]'s prefix-cache lab (1.5 s of unrelated requests before each measured server,
# timings.cache_ms, pipelines made per request, three restarts). Usage on the device:
# bash lab/h200-s9a.sh (prints the tables last).
set -u
. lab/tile-bench.sh
b default
b t256 ROCKY_ATTN_TILE=256,16,2,2,1,1
timeout 60 $R bench -m $M -p 512 -n 128 -ub 512 -r 2 --no-roofline -o json > "$O/base.json" 2> "$O/base.err"
timeout 60 $R bench -m $M -p 16,50,186 -n 0 -d 5000 -ub 512 -r 2 --no-roofline -o json > "$O/short.json" 2> "$O/short.err"
timeout 90 $R bench -m $M -p 512 -n 64 -npl 1,4 -ub 512 -r 2 --no-roofline -o json > "$O/npl.json" 2> "$O/npl.err"
ln -sf $M /tmp/qwen2.5-3b-q4_k_m.gguf
cp lab/h200-prefix-cache.sh .devpack/ && OUT=$O timeout 240 .devpack/h200-prefix-cache.sh > "$O/prefix.txt" 2>&1
OUT=$O REPS=2 timeout 200 bash lab/h200-serve.sh > "$O/serve.txt" 2>&1
# [N5] the driver's statistics of a fast and two slow flash tiles (registers, local memory)
for t in 512,32,2,2,1,1 256,16,2,2,1,1 64,32,4,8,1,1 128,16,4,2,1,0 256,16,2,4,1,1; do
  echo "tile $t" >> "$O/pstats.txt"
  ROCKY_PIPELINE_STATS=attention_flash ROCKY_ATTN_TILE=$t timeout 60 $R bench -m $M -p 1024 -n 0 -ub 512 -r 1 --no-roofline -o json 2>&1 > /dev/null | grep -a "^pipeline\|rocky: error" >> "$O/pstats.txt"
done
python3 lab/bench_table.py "$O" "${names[@]}" base short npl --ms
tail -5 "$O/serve.txt"
tail -16 "$O/prefix.txt"
cut -c1-700 "$O/pstats.txt"
