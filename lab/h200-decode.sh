#!/usr/bin/env bash
# One device call ([N4] baseline): roofline, the 3B synth, pp512/tg128 at ub 512 (the [N1]
# before-figure), then one tg profile (GPU time per op of one decode token) and nvidia-smi's
# memory while it runs. Usage on the device: .devpack/lab/h200-decode.sh (prints a table last).
set -u
D=$(cd "$(dirname "$0")/.." && pwd)
R="$D/run rocky"
O=${OUT:-/tmp/out}; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
$R roofline --reps 3 --json > "$O/roofline.json" 2> "$O/roofline.err"
timeout 200 $R synth --preset ${PRESET:-qwen2.5-3b} --type q4_k_m -q -o /tmp/m.gguf > /dev/null 2>&1 || echo synth failed
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$O/smi.txt" 2>/dev/null &
smi=$!
timeout 240 $R bench -m /tmp/m.gguf -p 512 -n 128 -ub 512 -r ${REPS:-3} --roofline-json "$O/roofline.json" -o json -q > "$O/bench.json" 2> "$O/bench.err"
kill $smi 2>/dev/null
timeout 120 $R bench -m /tmp/m.gguf -p 512 -n 16 -ub 512 -r 1 --profile --no-roofline -o json -q > "$O/profile.json" 2> "$O/profile.err"
python3 - "$O" <<'PY'
import json, sys, os
o = sys.argv[1]
r = json.load(open(os.path.join(o, "roofline.json")))
print(f"roofline fp32 {r['fp32_tflops']:.1f} int8 {r['int8_dot_tops']:.1f} copy {r['copy_gbs']:.0f} GB/s")
try:
    smi = [int(x) for x in open(os.path.join(o, "smi.txt")).read().split() if x.isdigit()]
    print(f"nvidia-smi peak {max(smi)} MiB")
except Exception as e: print("smi", e)
for row in json.load(open(os.path.join(o, "bench.json"))):
    print(f"{row['test']:8} {row['avg_ts']:10.1f} ± {row['stddev_ts']:.1f} t/s  peak {row.get('peak_device_memory',0)/2**20:.0f} MiB")
for row in json.load(open(os.path.join(o, "profile.json"))):
    tot = sum(p['ms'] for p in row['profile'])
    print(f"-- {row['test']} profile total {tot:.2f} ms")
    for p in sorted(row['profile'], key=lambda p: -p['ms'])[:14]:
        print(f"   {p['op']:28} {p['ms']:8.3f} ms  {p['dispatches']:4d} disp")
PY
