#!/usr/bin/env bash
# One device call: roofline, pipeline statistics, then mul_mmq (weights in the mmq repack layout)
# on q4_K M=4096,N=512,K=14336 with the nvidia profile and the tile variants lab/tiles/$SWEEP*.json
# (z: sweeps 1-2 of tuning-log #8, n: sweep 3 of #9),
# the no-dot fallback, the other weight types, and the shape-aware tile choice on the small-grid
# shapes of a 3B model (attn_k/attn_v 256×2048, attn_q 2048×2048, ffn_down 2048×11008) with the
# profile's choice vs the main tile only (lab/tiles/shape_main_tile_only.json).
# Usage on the device: .devpack/lab/h200.sh  (writes $OUT/results.tar.gz, stats.txt; prints a table last)
set -u
D=$(cd "$(dirname "$0")/.." && pwd)
R="$D/run rocky"
O=${OUT:-/tmp/out}; mkdir -p "$O"
W=/tmp/h200res; rm -rf "$W"; mkdir -p "$W"
S=${S:-4096,512,14336}
SHAPES=${SHAPES:-256,512,2048 2048,512,2048 2048,512,11008 11008,512,2048}
$R devices > "$W/devices.txt" 2>&1; head -8 "$W/devices.txt"
$R roofline --reps 3 --json > "$W/roofline.json" 2>&1; cat "$W/roofline.json"
for t in q4_K q6_K q8_0; do
  $R bench-op --type $t --shape $S --reps 3 --no-roofline --pipeline-stats --allow-spills > "$W/stats_$t.txt" 2>&1
  grep -E "^pipeline mul_mmq|TFLOPS" "$W/stats_$t.txt" | cut -c1-400
done
for f in ${STATS_TILES:-n05_64x128_8x8_wg128 n07_128x256_8x8_wg512 n10_64x256_4x8_wg512_prev_default}; do
  $R bench-op --type q4_K --shape $S --reps 1 --no-roofline --pipeline-stats --allow-spills --tune "$D/lab/tiles/$f.json" > "$W/stats_q4_K_$f.txt" 2>&1
  grep -E "^pipeline mul_mmq" "$W/stats_q4_K_$f.txt" | cut -c1-400
done
cat "$W"/stats_*.txt > "$O/stats.txt"
run() { local name=$1; shift; $R bench-op --reps 10 --no-roofline --json "$@" > "$W/b_$name.json" 2> "$W/b_$name.err" || { echo "$name FAILED"; tail -3 "$W/b_$name.err"; }; }
run q4K_default --type q4_K --shape $S
for f in "$D"/lab/tiles/${SWEEP:-n}*.json; do n=$(basename "$f" .json); run "q4K_$n" --type q4_K --shape $S --tune "$f"; done
run q4K_nodot --type q4_K --shape $S --kernel mmq-nodot
for t in q6_K q8_0 q4_0; do run "${t}_default" --type $t --shape $S; done
for f in ${Q6K_TILES:-n05_64x128_8x8_wg128 n08_128x128_8x4_wg512 n10_64x256_4x8_wg512_prev_default}; do run "q6K_$f" --type q6_K --shape $S --tune "$D/lab/tiles/$f.json"; done
for sh in $SHAPES; do
  for t in q4_K q6_K; do
    run "shape_${t}_${sh//,/x}_pick" --type $t --shape $sh
    run "shape_${t}_${sh//,/x}_main" --type $t --shape $sh --tune "$D/lab/tiles/shape_main_tile_only.json"
  done
done
tar -C "$W" -czf "$O/results.tar.gz" .
python3 - "$W" <<'PY'
import json, sys, glob, os
o = sys.argv[1]
try:
    r = json.load(open(os.path.join(o, "roofline.json")))
except Exception:
    r = {"fp32_tflops": 50.8, "int8_dot_tops": 94.9, "fp16_tflops": 0, "copy_gbs": 0}
print(f"roofline: fp32 {r['fp32_tflops']:.1f} TFLOPS, fp16 {r['fp16_tflops']:.1f}, int8dot {r['int8_dot_tops']:.1f} TOPS, copy {r['copy_gbs']:.0f} GB/s")
print(f"{'run':34} {'shape':16} {'tile':46} {'ms':>7} {'TFLOPS':>6} {'%dot':>5} {'nmse':>7}")
for f in sorted(glob.glob(os.path.join(o, "b_*.json"))):
    try: j = json.load(open(f))
    except Exception: print(os.path.basename(f), "no result"); continue
    t = j['tflops']
    sh = f"{j['M']}x{j['N']}x{j['K']}"
    print(f"{os.path.basename(f)[2:-5]:34} {sh:16} {j['tile'].replace(' step1','').replace('bk_step','')[:46]:46} {j['mul_mmq_ms']:7.3f} {t:6.2f} {100*t/r['int8_dot_tops']:5.1f} {j['nmse_sampled']:7.0e}")
PY
# End to end (E2E=1): pp512 at ub 512 with the int8 path, per-op profile (synth qwen2.5-3b q4_K_M).
if [[ ${E2E:-0} == 1 ]]; then
  timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o /tmp/q3b.gguf > "$W/synth.txt" 2>&1
  ROCKY_MATMUL=mmq timeout 120 $R bench -m /tmp/q3b.gguf -p 512 -n 0 -ub 512 -r 3 --no-roofline -q > "$W/e2e_bench.txt" 2>&1
  ROCKY_MATMUL=mmq timeout 120 $R bench -m /tmp/q3b.gguf -p 512 -n 0 -ub 512 -r 1 --no-roofline --profile -q > "$W/e2e_profile.txt" 2>&1
  tar -C "$W" -czf "$O/results.tar.gz" .
  cat "$W/e2e_bench.txt"; grep -iE "ffn|attn|kqv|total|q8_1|quant" "$W/e2e_profile.txt" | head -30
fi
