#!/usr/bin/env bash
# [M6] rocky bench on the H200 (one device call): roofline, synth qwen2.5-3b q4_k_m, the llama-bench
# table at ub 64…1024 (pp512, tg128) on the default path, then --profile of pp512 at ub 512 (and of one
# tg token) with attention-tile variants, and the [M5] bar product. Writes $OUT/*; prints a table last.
# Usage from the repository root on the device (after ../shared/device/pack.sh .devpack build/rocky,
# copying this script to .devpack/): .devpack/h200-bench.sh
set -u
D=$(cd "$(dirname "$0")" && pwd); R="$D/run rocky"; O=${OUT:-/tmp/out}; mkdir -p "$O"
UB=${UB:-64,128,256,512,1024}; REPS=${REPS:-5}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$O/gpu.txt" 2>&1
$R devices > "$O/devices.txt" 2>&1; head -4 "$O/devices.txt"
timeout 120 $R roofline --reps 5 --json > "$O/roofline.json" 2> "$O/roofline.err"; cat "$O/roofline.json"
time timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o /tmp/q3b.gguf 2>&1 | tail -2
RJ="--roofline-json $O/roofline.json"
time timeout 240 $R bench -m /tmp/q3b.gguf -p 512 -n 128 -ub $UB -r $REPS $RJ -o json > "$O/bench.json" 2> "$O/bench.err" || tail -5 "$O/bench.err"
P="-m /tmp/q3b.gguf -p 512 -n 1 -ub 512 -r 1 --profile $RJ"
timeout 90 $R bench $P > "$O/profile.txt" 2>&1 || echo "profile failed"
i=0; for t in ${ATTN_TILES:-}; do i=$((i+1)); ROCKY_ATTN_TILE=$t timeout 90 $R bench $P > "$O/profile_attn$i.txt" 2>&1 || echo "profile $t failed"; grep -E "pp512 at|kqv_out  " "$O/profile_attn$i.txt" | head -2 | sed "s/^/[attn $t] /"; done
# q4_K repack layout A/B (nibble pairs, the default, against int8 values) end to end and on the ffn_gate shape.
if [[ ${NIB_AB:-0} == 1 ]]; then
  echo '{"mmq_q4k_nibbles": 0}' > /tmp/int8.json
  ROCKY_TUNE=/tmp/int8.json timeout 90 $R bench $P > "$O/profile_int8.txt" 2>&1; grep -E "pp512 at|ffn_gate  |ffn_up  " "$O/profile_int8.txt" | head -3 | sed "s/^/[q4_K int8] /"
  for tu in "" /tmp/int8.json; do timeout 60 $R bench-op --type q4_K --shape 11008,512,2048 --reps 10 --no-roofline ${tu:+--tune $tu} 2>&1 | grep mul_mmq | sed "s|^|[ffn_gate shape ${tu:-nibbles}] |"; done
fi
timeout 60 $R bench-op --type q4_K --shape 4096,512,14336 --reps 10 > "$O/bar_q4K.txt" 2>&1; grep -E "mul_mmq|NMSE" "$O/bar_q4K.txt"
cat "$O/profile.txt"
python3 - "$O" <<'PY'
import json, sys, os
o = sys.argv[1]
r = json.load(open(os.path.join(o, "roofline.json")))
print(f"roofline: fp32 {r['fp32_tflops']:.1f} TFLOPS, int8dot {r['int8_dot_tops']:.1f} TOPS, copy {r['copy_gbs']:.0f} GB/s")
try: rows = json.load(open(os.path.join(o, "bench.json")))
except Exception as e: rows = []; print("bench: no result", e)
for x in rows:
    print(f"ub {x['n_ubatch']:5} {x['test']:7} {x['avg_ts']:10.1f} ± {x['stddev_ts']:7.1f} t/s {x['tflops']:7.2f} TFLOP/s "
          f"{x['roof_pct']:5.1f}% {x['roof_kind']:8} host readback {x['host_ms_per_ubatch']['readback']:6.2f} ms submit_wait {x['host_ms_per_ubatch']['submit_wait']:7.2f} ms peak {x['peak_device_memory']/2**30:.2f} GiB")
PY
