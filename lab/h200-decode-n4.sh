#!/usr/bin/env bash
# [N4] decode branch, one device call: roofline; bench-op N = 1 (the decode matvec) on the 3B's
# shapes (ffn_up / ffn_gate 11008×2048 q4_K, ffn_down 2048×11008 q4_K, attn_q 2048×2048, attn_k
# 256×2048, the 151936×2048 q6_K head), a few ROCKY_MMV_SHAPE variants of the big three; the 3B
# synth pp512/tg128 at ub 512 (+ tg128 with the decode epilogues off), one tg profile. Usage on the
# device: .devpack-dec/h200-decode-n4.sh (prints a summary last; raw files under $OUT).
set -u
D=$(cd "$(dirname "$0")" && pwd)
R="$D/run rocky"
O=${OUT:-/tmp/out}; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
$R roofline --reps 3 --json > "$O/roofline.json" 2> "$O/roofline.err"
(timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o /tmp/m.gguf > /dev/null 2>&1 || echo synth failed) &
synth=$!
op() {  # name type shape [env]
  local n=$1 t=$2 s=$3; shift 3
  env "$@" timeout 60 $R bench-op --type "$t" --shape "$s" --reps 30 --no-roofline --json > "$O/op-$n.json" 2> "$O/op-$n.err" || echo "bench-op $n failed"
}
op ffn_up q4_K 11008,1,2048
op ffn_down q4_K 2048,1,11008
op head q6_K 151936,1,2048
op attn_q q4_K 2048,1,2048
op attn_k q4_K 256,1,2048
wait $synth
timeout 150 $R bench -m /tmp/m.gguf -p 512 -n 128 -ub 512 -r 3 --roofline-json "$O/roofline.json" -o json -q > "$O/bench.json" 2> "$O/bench.err"
timeout 60 $R bench -m /tmp/m.gguf -p 512 -n 16 -ub 512 -r 1 --profile --no-roofline -o json -q > "$O/profile.json" 2> "$O/profile.err"
ROCKY_FUSE_EPILOGUE=0 timeout 60 $R bench -m /tmp/m.gguf -p 0 -n 128 -ub 512 -r 3 --roofline-json "$O/roofline.json" -o json -q > "$O/bench-nofuse.json" 2> "$O/bench-nofuse.err"
for v in 64,16,0 128,8,0 32,8,0 64,4,0; do
  op "ffn_up@$v" q4_K 11008,1,2048 ROCKY_MMV_SHAPE=$v
  op "ffn_down@$v" q4_K 2048,1,11008 ROCKY_MMV_SHAPE=$v
  op "head@$v" q6_K 151936,1,2048 ROCKY_MMV_SHAPE=$v
done
for v in 64,1,0 256,1,0; do op "ffn_down@$v" q4_K 2048,1,11008 ROCKY_MMV_SHAPE=$v; done
python3 "$D/h200-decode-n4-summary.py" "$O"
