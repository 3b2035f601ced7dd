#!/usr/bin/env bash
# Session 11 (written without a device; the next session's first call): main's new NVIDIA flash tile
# 256,32,4,2,0,1,0,1 (attention_flash_roll, tuning-log #46) at -r 2 against the previous default
# 256,32,2,2,0,0 — pp4096, pp512 @ d8192 — then pp512 / tg128, -npl 1,4, the --profile of pp4096 and of
# pp512 @ d8192 (attention ms → % of fp32), the rolled pipelines' statistics, two rolled neighbours
# (8 × 2 and 4 × 1 scores per invocation) at -r 1, and the roofline. Usage on the device:
#   bash lab/h200-s11a.sh   (after .devpack is carried; ≈ 8 min)
set -u
. lab/tile-bench.sh
b default
b t256-32-2-2-00 ROCKY_ATTN_TILE=256,32,2,2,0,0
t t128-32-8-2-01r ROCKY_ATTN_TILE=128,32,8,2,0,1,0,1
t t256-32-4-1-01r ROCKY_ATTN_TILE=256,32,4,1,0,1,0,1
ROCKY_PIPELINE_STATS=attention_flash timeout 60 $R bench -m $M -p 1024 -n 0 -ub 512 -r 1 --no-roofline -o json 2>&1 > /dev/null | grep -a "^pipeline" | sed -e 's/ Binary Size=[0-9]*//' | cut -c1-200
main_rows
