#!/usr/bin/env bash
# Session 4, one device call: [N8] the hand-made nvidia profile against the full `rocky tune`
# profile side by side (pp512 -r 5 each, alternating), [N5] the tuned profile at pp4096 and depth
# 8192, [N6] gemma-3-4b's prefill profile (per-op GPU time), [N3] the device disk's read rate.
# Needs TUNED=<profile json> (the full tune's file, e.g. copied into .devpack/).
# Usage on the device: TUNED=.devpack/profile_full.json bash lab/h200-s4a.sh
set -u
R="$PWD/.devpack/run rocky"; O=${OUT:-/tmp/out}; mkdir -p "$O"; M=/tmp/q3b.gguf
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
[[ -f $M ]] || timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1
timeout 60 $R roofline --reps 3 --json > "$O/roofline.json" 2> "$O/roofline.err"
B="-m $M -ub 512 --no-roofline -o json -q"
for i in 1 2; do
  XDG_CACHE_HOME=/tmp/none timeout 90 $R bench $B -p 512 -n 0 -r 5 > "$O/nv$i.json" 2> "$O/nv$i.err"
  ROCKY_TUNE=$TUNED timeout 90 $R bench $B -p 512 -n 0 -r 5 > "$O/tu$i.json" 2> "$O/tu$i.err"
done
ROCKY_TUNE=$TUNED timeout 150 $R bench $B -p 4096 -n 0 -r 2 > "$O/tu4096.json" 2> "$O/tu4096.err"
ROCKY_TUNE=$TUNED timeout 200 $R bench $B -p 512 -n 128 -d 8192 -r 2 > "$O/tud8k.json" 2> "$O/tud8k.err"
timeout 200 $R synth --preset gemma-3-4b --type q4_k_m -q -o /tmp/g.gguf > /dev/null 2>&1 || echo synth gemma failed
ROCKY_TUNE=$TUNED timeout 90 $R bench -m /tmp/g.gguf -ub 512 --no-roofline -o json -q -p 512 -n 0 -r 3 > "$O/g.json" 2> "$O/g.err"
ROCKY_TUNE=$TUNED timeout 90 $R bench -m /tmp/g.gguf -ub 512 --no-roofline -o json -q -p 512 -n 0 -r 1 --profile > "$O/gprof.json" 2> "$O/gprof.err"
ROCKY_TUNE=$TUNED timeout 90 $R bench $B -p 512 -n 0 -r 1 --profile > "$O/qprof.json" 2> "$O/qprof.err"
# disk: write 1 GiB, drop the page cache if allowed, read it back
dd if=/dev/urandom of=/tmp/disk.bin bs=4M count=256 status=none; sync
(echo 3 > /proc/sys/vm/drop_caches) 2>/dev/null && echo "page cache dropped" || echo "drop_caches not allowed"
dd if=/tmp/disk.bin of=/dev/null bs=4M 2>&1 | tail -1
dd if=/tmp/disk.bin of=/dev/null bs=4M 2>&1 | tail -1
rm -f /tmp/disk.bin
python3 - "$O" <<'PY'
import json, sys, os
o = sys.argv[1]
def rows(f, tag):
    try:
        for x in json.load(open(os.path.join(o, f))):
            print(f"{tag:10} {x['test']:14} {x['avg_ts']:9.1f} ± {x['stddev_ts']:6.1f} t/s  {x.get('tflops', '')}")
    except Exception as e: print(tag, "failed", e)
for f, t in (("nv1.json", "nvidia"), ("tu1.json", "tuned"), ("nv2.json", "nvidia"), ("tu2.json", "tuned"),
             ("tu4096.json", "tuned"), ("tud8k.json", "tuned"), ("g.json", "gemma")):
    rows(f, t)
for f in ("gprof.json", "qprof.json"):
    try:
        for row in json.load(open(os.path.join(o, f))):
            tot = sum(p['ms'] for p in row['profile'])
            print(f"-- {f} {row['test']} total {tot:.3f} ms")
            for p in sorted(row['profile'], key=lambda p: -p['ms'])[:14]:
                print(f"   {p['op']:30} {p['ms']:7.3f} ms {p['dispatches']:4d} disp")
    except Exception as e: print(f, "failed", e)
PY
