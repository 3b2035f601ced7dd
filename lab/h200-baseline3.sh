#!/usr/bin/env bash
# Session-3 baseline on the H200 (one device call): the decode step's per-op GPU time (every op,
# with dispatch counts), the matvec kernels alone at N = 1 ([N4]: ffn_up, ffn_down, the q6_K head),
# and the 7B's tg128 ([N4]); with MODELS=... also the [N6] presets' pp512/tg128.
# Usage on the device (after ../shared/device/pack.sh .devpack build/rocky): bash lab/h200-baseline3.sh
set -u
R="$PWD/.devpack/run rocky"; O=${OUT:-/tmp/out}; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
timeout 60 $R roofline --reps 3 --json > "$O/roofline.json" 2> "$O/roofline.err"
RJ="--roofline-json $O/roofline.json"
for s in "q4_K 11008,1,2048 ffn_up" "q4_K 2048,1,11008 ffn_down" "q6_K 2048,1,11008 ffn_down_q6" \
         "q6_K 151936,1,2048 head" "q4_K 2048,1,2048 attn_q" "q4_K 256,1,2048 attn_k"; do
  set -- $s
  timeout 60 $R bench-op --type "$1" --shape "$2" --reps 30 --no-roofline --json > "$O/op-$3.json" 2> "$O/op-$3.err"
done
timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o /tmp/m3.gguf > /dev/null 2>&1 || echo synth 3b failed
timeout 120 $R bench -m /tmp/m3.gguf -p 512 -n 128 -ub 512 -r 3 $RJ -o json -q > "$O/b3.json" 2> "$O/b3.err"
timeout 90 $R bench -m /tmp/m3.gguf -p 0 -n 16 -ub 512 -r 1 --profile --no-roofline -o json -q > "$O/prof3.json" 2> "$O/prof3.err"
for m in ${MODELS:-}; do
  timeout 200 $R synth --preset "$m" --type q4_k_m -q -o /tmp/n6.gguf > /dev/null 2>&1 || echo "synth $m failed"
  timeout 150 $R bench -m /tmp/n6.gguf -p 512 -n 128 -ub 512 -r 3 $RJ -o json -q > "$O/n6-$m.json" 2> "$O/n6-$m.err" || tail -3 "$O/n6-$m.err"
  rm -f /tmp/n6.gguf
done
if [ -n "${SEVEN:-1}" ]; then
  rm -f /tmp/m3.gguf
  timeout 300 $R synth --preset qwen2.5-7b --type q4_k_m -q -o /tmp/m7.gguf > /dev/null 2>&1 || echo synth 7b failed
  timeout 150 $R bench -m /tmp/m7.gguf -p 512 -n 128 -ub 512 -r 3 $RJ -o json -q > "$O/b7.json" 2> "$O/b7.err"
fi
python3 - "$O" ${MODELS:-} <<'PY'
import json, sys, os
o, models = sys.argv[1], sys.argv[2:]
r = json.load(open(os.path.join(o, "roofline.json")))
copy = r['copy_gbs']
print(f"roofline fp32 {r['fp32_tflops']:.1f} int8 {r['int8_dot_tops']:.1f} copy {copy:.0f} GB/s")
for n in ["ffn_up", "ffn_down", "ffn_down_q6", "head", "attn_q", "attn_k"]:
    try:
        j = json.load(open(os.path.join(o, f"op-{n}.json")))
        print(f"op {n:12} {j['type']:5} {j['M']}x{j['K']} {1000*j['matvec_ms']:8.1f} us {j['gbs']:7.0f} GB/s {100*j['gbs']/copy:5.1f} % copy  [{j['shape']}]")
    except Exception as e: print("op", n, "failed", e)
def rows(f, tag):
    try:
        for x in json.load(open(os.path.join(o, f))):
            print(f"{tag:14} {x['test']:7} {x['avg_ts']:9.1f} ± {x['stddev_ts']:5.1f} t/s  peak {x.get('peak_device_memory',0)/2**20:.0f} MiB  {x.get('matmul_path','')}")
    except Exception as e: print(tag, "failed", e)
rows("b3.json", "qwen2.5-3b")
for m in models: rows(f"n6-{m}.json", m)
rows("b7.json", "qwen2.5-7b")
try:
    for row in json.load(open(os.path.join(o, "prof3.json"))):
        tot = sum(p['ms'] for p in row['profile']); nd = sum(p['dispatches'] for p in row['profile'])
        print(f"-- {row['test']} profile total {tot:.3f} ms, {nd} dispatches")
        for p in sorted(row['profile'], key=lambda p: -p['ms']):
            print(f"   {p['op']:28} {p['ms']:7.3f} ms {p['dispatches']:4d} disp {1000*p['ms']/max(1,p['dispatches']):6.1f} us/disp")
except Exception as e: print("profile failed", e)
PY
