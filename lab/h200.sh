#!/usr/bin/env bash
# One device call: roofline, then q4_K M=4096,N=512,K=14336 with the nvidia profile and tile
# variants (lab/tiles/*.json), the no-dot fallback, other weight types, pipeline statistics.
# Usage on the device: .devpack/lab/h200.sh  (writes $OUT/*.json, prints a table last)
set -u
D=$(cd "$(dirname "$0")/.." && pwd)
R="$D/run rocky"
O=${OUT:-/tmp/out}; mkdir -p "$O"
S=4096,512,14336
$R devices > "$O/devices.txt" 2>&1; head -12 "$O/devices.txt"
$R roofline --reps 5 --json > "$O/roofline.json" 2>&1; cat "$O/roofline.json"
for t in q4_K q4_0 q6_K; do $R bench-op --type $t --shape $S --reps 10 --no-roofline --pipeline-stats > "$O/stats_$t.txt" 2>&1; grep -E "pipeline mul|TFLOPS" "$O/stats_$t.txt"; done
run() { local name=$1; shift; $R bench-op --shape $S --reps 10 --no-roofline --json "$@" > "$O/b_$name.json" 2> "$O/b_$name.err" || { echo "$name FAILED"; tail -3 "$O/b_$name.err"; }; }
run q4K_default --type q4_K
for f in "$D"/lab/tiles/*.json; do n=$(basename "$f" .json); run "q4K_$n" --type q4_K --tune "$f"; done
run q4K_nodot --type q4_K --kernel mmq-nodot
for t in q6_K q8_0 q4_0; do run "$t" --type $t; done
python3 - "$O" <<'PY'
import json, sys, glob, os
o = sys.argv[1]
r = json.load(open(os.path.join(o, "roofline.json")))
print(f"roofline: fp32 {r['fp32_tflops']:.1f} TFLOPS, fp16 {r['fp16_tflops']:.1f}, int8dot {r['int8_dot_tops']:.1f} TOPS, copy {r['copy_gbs']:.0f} GB/s")
print(f"{'run':28} {'tile':45} {'ms':>8} {'TFLOPS':>7} {'%dot':>5} {'%fp32':>5} {'nmse':>8}")
for f in sorted(glob.glob(os.path.join(o, "b_*.json"))):
    try: j = json.load(open(f))
    except Exception: print(os.path.basename(f), "no result"); continue
    t = j['tflops']
    print(f"{os.path.basename(f)[2:-5]:28} {j['tile']:45} {j['mul_mmq_ms']:8.3f} {t:7.2f} {100*t/r['int8_dot_tops']:5.1f} {100*t/r['fp32_tflops']:5.1f} {j['nmse_sampled']:8.1e}")
PY
