#!/usr/bin/env bash
# Session 7, call 1: the GQA decode attention (attention_decode.comp) against the per-(head, token)
# kernels (ROCKY_ATTN=simple) in one binary, and where a server's decode step spends its time.
#  1. bench -p 0 -n 128 -d 0,512,8192 (-r 2): default vs ROCKY_ATTN=simple; chunks of 64 / 256 at d8192;
#  2. bench -p 512 -n 64 -npl 1,4 (-r 2): default vs simple ([N7]'s 3× bar);
#  3. --profile -p 0 -n 16 -d 512: GPU ms per op of a decode token at depth 512;
#  4. lab/h200-serve.sh: bench pp512/tg128, [N2]'s TTFT and gap (+ the server's eval split, SM clocks).
# Usage on the device: bash lab/h200-s7.sh (prints tables last).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=".devpack/run rocky"; M=/tmp/q3b.gguf
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
b() { local name=$1; shift; timeout 150 env "$@" $R bench -m $M -ub 512 --no-roofline -o json ${BARGS} > "$O/$name.json" 2> "$O/$name.err" || echo "$name failed"; }
BARGS="-p 0 -n 128 -d 0,512,8192 -r 2" b depth
BARGS="-p 0 -n 128 -d 0,512,8192 -r 2" b depth_simple ROCKY_ATTN=simple
BARGS="-p 0 -n 128 -d 8192 -r 2" b split64 ROCKY_ATTN_SPLIT=64
BARGS="-p 0 -n 128 -d 8192 -r 2" b split256 ROCKY_ATTN_SPLIT=256
BARGS="-p 512 -n 64 -npl 1,4 -r 2" b npl
BARGS="-p 512 -n 64 -npl 1,4 -r 2" b npl_simple ROCKY_ATTN=simple
BARGS="-p 0 -n 16 -d 512 -r 1 --profile" b prof
BARGS="-p 0 -n 16 -d 512 -r 1 --profile" b prof_simple ROCKY_ATTN=simple
OUT=$O bash lab/h200-serve.sh > "$O/serve.txt" 2>&1 || echo "serve lab failed"
tail -8 "$O/serve.txt"
python3 lab/bench_table.py "$O" depth depth_simple split64 split256 npl npl_simple --prof prof prof_simple
