#!/usr/bin/env bash
# [N4] decode step (branch step), one device call: the 3B synth's tg128 with the replayed decode
# command buffer and rope_kv (default) against each switched off (ROCKY_DECODE_REPLAY=0,
# ROCKY_FUSE_DECODE=0), pp512 + tg128 at ub 512 as the table row, then one tg profile. Prints
# t/s, dispatches per token, the host split per token (setup / record / submit+wait / readback)
# and the replayed fraction. Usage on the device (pack as lab/h200-decode.sh):
#   .devpack/lab/h200-step.sh          (PRESET=qwen2.5-7b for the 7B; REPS=3 default)
set -u
D=$(cd "$(dirname "$0")/.." && pwd)
R="$D/run rocky"
O=${OUT:-/tmp/out}; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
$R roofline --reps 3 --json > "$O/roofline.json" 2> "$O/roofline.err"
timeout 200 $R synth --preset ${PRESET:-qwen2.5-3b} --type q4_k_m -q -o /tmp/m.gguf > /dev/null 2>&1 || echo synth failed
B="-m /tmp/m.gguf -ub 512 -r ${REPS:-3} --roofline-json $O/roofline.json -o json -q"
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$O/smi.txt" 2>/dev/null &
smi=$!
timeout 200 $R bench $B -p 512 -n 128 > "$O/bench.json" 2> "$O/bench.err"
kill $smi 2>/dev/null
ROCKY_DECODE_REPLAY=0 timeout 90 $R bench $B -p 0 -n 128 > "$O/bench-norec.json" 2> "$O/bench-norec.err"
ROCKY_FUSE_DECODE=0 timeout 90 $R bench $B -p 0 -n 128 > "$O/bench-nofuse.json" 2> "$O/bench-nofuse.err"
ROCKY_DECODE_REPLAY=0 ROCKY_FUSE_DECODE=0 timeout 90 $R bench $B -p 0 -n 128 > "$O/bench-neither.json" 2> "$O/bench-neither.err"
timeout 90 $R bench -m /tmp/m.gguf -p 0 -n 16 -ub 512 -r 1 --profile --no-roofline -o json -q > "$O/profile.json" 2> "$O/profile.err"
python3 - "$O" <<'PY'
import json, sys, os
o = sys.argv[1]
r = json.load(open(os.path.join(o, "roofline.json")))
print(f"roofline fp32 {r['fp32_tflops']:.1f} int8 {r['int8_dot_tops']:.1f} copy {r['copy_gbs']:.0f} GB/s")
try:
    smi = [int(x) for x in open(os.path.join(o, "smi.txt")).read().split() if x.isdigit()]
    print(f"nvidia-smi peak {max(smi)} MiB")
except Exception as e: print("smi", e)
print(f"{'run':18} {'test':7} {'t/s':>16} {'disp/tok':>8} {'setup':>7} {'record':>7} {'sub+wait':>8} {'readback':>8} {'replayed':>8}")
for name, f in [("default", "bench.json"), ("REPLAY=0", "bench-norec.json"), ("FUSE_DECODE=0", "bench-nofuse.json"),
                ("both off", "bench-neither.json")]:
    try:
        rows = json.load(open(os.path.join(o, f)))
    except Exception as e:
        print(name, "failed:", open(os.path.join(o, f.replace('.json', '.err'))).read()[-300:]); continue
    for row in rows:
        h = row.get("host_ms_per_ubatch", {})
        print(f"{name:18} {row['test']:7} {row['avg_ts']:9.1f} ± {row['stddev_ts']:4.1f} {h.get('dispatches',0):8.0f} "
              f"{h.get('setup',0):7.3f} {h.get('record',0):7.3f} {h.get('submit_wait',0):8.3f} {h.get('readback',0):8.3f} "
              f"{h.get('replayed',0):8.2f}  peak {row.get('peak_device_memory',0)/2**20:.0f} MiB")
for row in json.load(open(os.path.join(o, "profile.json"))):
    tot = sum(p['ms'] for p in row['profile'])
    print(f"-- {row['test']} profile (recorded, timestamps) total {tot:.2f} ms")
    for p in sorted(row['profile'], key=lambda p: -p['ms'])[:16]:
        print(f"   {p['op']:28} {p['ms']:8.3f} ms  {p['dispatches']:4d} disp")
PY
