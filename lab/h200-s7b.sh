#!/usr/bin/env bash
# Session 7, call 2: attention_decode with blocks and chunks of 32 keys, all loads of a phase issued
# first — against the per-(head, token) kernels (ROCKY_ATTN=simple) and other chunks, one binary.
# Usage on the device: bash lab/h200-s7b.sh (prints a table last).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=".devpack/run rocky"; M=/tmp/q3b.gguf
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
b() { local name=$1; shift; timeout 150 env "$@" $R bench -m $M -ub 512 --no-roofline -o json ${BARGS} > "$O/$name.json" 2> "$O/$name.err" || echo "$name failed"; }
BARGS="-p 0 -n 128 -r 2" b warm
BARGS="-p 0 -n 128 -d 0,512,8192 -r 2" b depth
BARGS="-p 0 -n 128 -d 0,512,8192 -r 2" b depth_simple ROCKY_ATTN=simple
BARGS="-p 0 -n 128 -d 512,8192 -r 2" b split64 ROCKY_ATTN_SPLIT=64
BARGS="-p 0 -n 128 -d 512,8192 -r 2" b split128 ROCKY_ATTN_SPLIT=128
BARGS="-p 512 -n 64 -npl 1,4 -r 2" b npl
BARGS="-p 0 -n 16 -d 512 -r 1 --profile" b prof
python3 lab/bench_table.py "$O" depth depth_simple split32 split64 split128 npl --prof prof
