#!/usr/bin/env bash
# [N4] decode branch, device call 2: bench-op N = 1 at the new NVIDIA default (64 × 4, ≥ 256
# groups) and the unrolled-loop variants (ROCKY_MMV_SHAPE=WG,ROWS,HALF,UNROLL), then the 3B synth
# pp512/tg128 at ub 512 (default; tg128 with UNROLL 2 everywhere) and one tg profile. Copy bandwidth
# from call 1's roofline (4,261 GB/s) in roofline.json next to this script. Usage on the device:
# .devpack-dec/h200-decode-n4b.sh; results in $OUT/ops.jsonl, bench*.json, profile.json.
set -u
D=$(cd "$(dirname "$0")" && pwd)
R="$D/run rocky"
O=${OUT:-/tmp/out}; mkdir -p "$O"
cp "$D/roofline.json" "$O/roofline.json"
(timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o /tmp/m.gguf > /dev/null 2>&1 || echo synth failed) &
synth=$!
op() {  # name type shape [env]
  local n=$1 t=$2 s=$3; shift 3
  if env "$@" timeout 60 $R bench-op --type "$t" --shape "$s" --reps 30 --no-roofline --json > /tmp/op.json 2> /tmp/op.err; then
    python3 -c "import json,sys; j=json.load(open('/tmp/op.json')); j['name']=sys.argv[1]; print(json.dumps(j))" "$n" >> "$O/ops.jsonl"
  else
    echo "bench-op $n failed: $(tail -c 300 /tmp/op.err)"
  fi
}
op ffn_up q4_K 11008,1,2048
op ffn_down q4_K 2048,1,11008
op head q6_K 151936,1,2048
op attn_q q4_K 2048,1,2048
op attn_k q4_K 256,1,2048
op attn_k_2 q4_K 256,1,2048 ROCKY_MMV_SHAPE=64,2,0
op attn_k_u2 q4_K 256,1,2048 ROCKY_MMV_SHAPE=64,1,0,2
op attn_q_u2 q4_K 2048,1,2048 ROCKY_MMV_SHAPE=64,4,0,2
for v in 64,4,0,2 64,2,0,2 128,4,0,2 64,8,0,2 32,4,0; do
  op "ffn_down_$v" q4_K 2048,1,11008 ROCKY_MMV_SHAPE=$v
  op "ffn_up_$v" q4_K 11008,1,2048 ROCKY_MMV_SHAPE=$v
done
op ffn_up_64,2,0 q4_K 11008,1,2048 ROCKY_MMV_SHAPE=64,2,0
op ffn_up_64,1,0 q4_K 11008,1,2048 ROCKY_MMV_SHAPE=64,1,0
op head_64,4,0,2 q6_K 151936,1,2048 ROCKY_MMV_SHAPE=64,4,0,2
op head_32,4,0 q6_K 151936,1,2048 ROCKY_MMV_SHAPE=32,4,0
op head_q8 q8_0 151936,1,2048
wait $synth
timeout 150 $R bench -m /tmp/m.gguf -p 512 -n 128 -ub 512 -r 3 --roofline-json "$O/roofline.json" -o json -q > "$O/bench.json" 2> "$O/bench.err"
ROCKY_MMV_SHAPE=64,4,0,2 timeout 60 $R bench -m /tmp/m.gguf -p 0 -n 128 -ub 512 -r 3 --roofline-json "$O/roofline.json" -o json -q > "$O/bench-u2.json" 2> "$O/bench-u2.err"
timeout 60 $R bench -m /tmp/m.gguf -p 0 -n 16 -ub 512 -r 1 --profile --no-roofline -o json -q > "$O/profile.json" 2> "$O/profile.err"
python3 "$D/h200-decode-n4b-summary.py" "$O"
