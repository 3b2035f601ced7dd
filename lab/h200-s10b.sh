#!/usr/bin/env bash
# Session 10, call 2: main's new defaults (NVIDIA flash tile 256,32,2,2,0,0) at -r 2 — pp512, pp4096,
# pp512 @ d8192, tg128, -npl 1,4 — the --profile of pp4096 (attention ms), and two neighbours of the
# tile (prefetch; 512 x 16 rows). Usage on the device: bash lab/h200-s10b.sh
set -u
. lab/tile-bench.sh
b default
b t256-32-2-2-10 ROCKY_ATTN_TILE=256,32,2,2,1,0
b t512-16-1-2-00 ROCKY_ATTN_TILE=512,16,1,2,0,0
main_rows
