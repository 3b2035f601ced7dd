#!/usr/bin/env bash
# Session 8, call 3: tiles that keep one vec4 of O per invocation (32 column threads) but more
# rows per invocation or per workgroup — is the slowdown of #38 tied to CT < 32?
# Usage on the device: bash lab/h200-s8c.sh (prints a table last).
set -u
. lab/tile-bench.sh
b default
b t128-32-8-2ph ROCKY_ATTN_TILE=128,32,8,2,1,1
b t256-32-4-2ph ROCKY_ATTN_TILE=256,32,4,2,1,1
b t256-16-2-2ph ROCKY_ATTN_TILE=256,16,2,2,1,1
b t128-16-4-2h ROCKY_ATTN_TILE=128,16,4,2,0,1
python3 lab/bench_table.py "$O" "${names[@]}"
