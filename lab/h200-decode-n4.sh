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
op head_q8 q8_0 151936,1,2048
for v in 64,16,0 128,8,0 32,8,0 64,4,0 256,2,0 64,8,1; do
  op "ffn_up@$v" q4_K 11008,1,2048 ROCKY_MMV_SHAPE=$v
  op "ffn_down@$v" q4_K 2048,1,11008 ROCKY_MMV_SHAPE=$v
  op "head@$v" q6_K 151936,1,2048 ROCKY_MMV_SHAPE=$v
done
for v in 64,1,0 128,1,0 256,1,0; do op "ffn_down@$v" q4_K 2048,1,11008 ROCKY_MMV_SHAPE=$v; done
wait $synth
timeout 200 $R bench -m /tmp/m.gguf -p 512 -n 128 -ub 512 -r 3 --roofline-json "$O/roofline.json" -o json -q > "$O/bench.json" 2> "$O/bench.err"
ROCKY_FUSE_EPILOGUE=0 timeout 100 $R bench -m /tmp/m.gguf -p 0 -n 128 -ub 512 -r 3 --roofline-json "$O/roofline.json" -o json -q > "$O/bench-nofuse.json" 2> "$O/bench-nofuse.err"
timeout 100 $R bench -m /tmp/m.gguf -p 512 -n 16 -ub 512 -r 1 --profile --no-roofline -o json -q > "$O/profile.json" 2> "$O/profile.err"
python3 - "$O" <<'PY'
import json, sys, os, glob
o = sys.argv[1]
r = json.load(open(os.path.join(o, "roofline.json")))
copy = r['copy_gbs']
print(f"roofline fp32 {r['fp32_tflops']:.1f} int8 {r['int8_dot_tops']:.1f} copy {copy:.0f} GB/s")
for f in sorted(glob.glob(os.path.join(o, "op-*.json"))):
    try:
        j = json.load(open(f))
        print(f"{os.path.basename(f)[3:-5]:22} {j['type']:5} {j['M']:6}x{j['K']:5} {j['matvec_ms']*1e3:8.1f} us (med {j['matvec_median_ms']*1e3:7.1f})"
              f" {j['gbs']:7.0f} GB/s = {100*j['gbs']/copy:5.1f} % copy; gguf {j['gbs_gguf']:6.0f} GB/s; nmse {j['nmse_sampled']:.1e}; {j['shape']}")
    except Exception as e: print(f, "failed", e, open(f[:-5] + ".err").read()[-300:])
for name in ("bench.json", "bench-nofuse.json"):
    try:
        for row in json.load(open(os.path.join(o, name))):
            print(f"{name:18} {row['test']:8} {row['avg_ts']:10.1f} ± {row['stddev_ts']:.1f} t/s  bytes/token {row.get('bytes_per_token',0)/1e6:.0f} MB"
                  f"  {row.get('gbs',0):.0f} GB/s  {row.get('roof_pct',0):.1f} % {row.get('roof_kind','')}  peak {row.get('peak_device_memory',0)/2**20:.0f} MiB"
                  f"  host {json.dumps(row.get('host_ms_per_ubatch',{}))}")
    except Exception as e: print(name, "failed", e, open(os.path.join(o, name[:-5] + ".err")).read()[-500:])
try:
    for row in json.load(open(os.path.join(o, "profile.json"))):
        tot = sum(p['ms'] for p in row['profile'])
        print(f"-- {row['test']} profile total {tot:.3f} ms")
        for p in sorted(row['profile'], key=lambda p: -p['ms'])[:24]:
            print(f"   {p['op']:28} {p['ms']:8.4f} ms  {p['dispatches']:4d} disp")
except Exception as e: print("profile failed", e)
PY
