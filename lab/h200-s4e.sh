#!/usr/bin/env bash
# Session 4, last device call (main after the delta / bstep / hybridpc merges): [N7] -npl 1,2,4,8
# and the x4 step's per-op profile against x1 (bstep's instruments); the short ubatch at depth
# (pp50 @ d5000: split-key attention + pick_mmq_tile's least-padding alternative) and [N3]'s
# prefix-cache figures; [N9] qwen3.5-4b pp512 / pp4096 with the chunked delta rule and the serial
# kernel (ROCKY_DELTA_CHUNK=0) and the delta rule's share of pp512. Usage: bash lab/h200-s4e.sh
set -u
R="$PWD/.devpack/run rocky"; O=${OUT:-/tmp/out}; mkdir -p "$O"; M=/tmp/q3b.gguf; Q=/tmp/q35.gguf
export XDG_CACHE_HOME=/tmp/none
B="-ub 512 --no-roofline -o json -q"
[[ -f $M ]] || timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1
timeout 60 $R bench -m $M $B -p 512 -n 0 -r 3 > /dev/null 2>&1  # clocks up
timeout 150 $R bench -m $M $B -p 512 -n 128 -npl 1,2,4,8 -r 2 > $O/npl.json 2> /tmp/e || tail -3 /tmp/e
timeout 90 $R bench -m $M $B -p 512 -n 16 -npl 1,4 -r 1 --profile > $O/nplprof.json 2> /tmp/e || tail -3 /tmp/e
timeout 90 $R bench -m $M $B -p 50 -n 0 -d 5000 -r 3 > $O/d5k.json 2> /tmp/e || tail -3 /tmp/e
cp lab/h200-prefix-cache.sh .devpack/ && bash .devpack/h200-prefix-cache.sh 2>&1 | tail -6
timeout 200 $R synth --preset qwen3.5-4b --type q4_k_m -q -o $Q > /dev/null 2>&1 || echo synth q35 failed
timeout 120 $R bench -m $Q $B -p 512,4096 -n 128 -r 2 > $O/q35c.json 2> /tmp/e || tail -3 /tmp/e
ROCKY_DELTA_CHUNK=0 timeout 120 $R bench -m $Q $B -p 512,4096 -n 0 -r 2 > $O/q35s.json 2> /tmp/e || tail -3 /tmp/e
timeout 90 $R bench -m $Q $B -p 512 -n 0 -r 1 --profile > $O/q35p.json 2> /tmp/e || tail -3 /tmp/e
python3 - "$O" <<'PY'
import json, sys, os
o = sys.argv[1]
def rows(f):
    try: return json.load(open(os.path.join(o, f)))
    except Exception as e: print(f, "failed", e); return []
for f, t in (("npl.json", "qwen2.5-3b"), ("d5k.json", "qwen2.5-3b"), ("q35c.json", "q3.5-4b chunk"), ("q35s.json", "q3.5-4b serial")):
    for x in rows(f): print(f"{t:15} {x['test']:16} {x['avg_ts']:9.1f} ± {x['stddev_ts']:6.1f} t/s  {x.get('tflops', 0):.2f} TFLOP/s")
for x in rows("nplprof.json"):
    if not x.get("profile"): continue
    tot = sum(p['ms'] for p in x['profile'])
    print(f"-- {x['test']} GPU total {tot:.3f} ms")
    for p in sorted(x['profile'], key=lambda p: -p['ms'])[:9]: print(f"   {p['op']:28} {p['ms']:8.3f} ms {p['dispatches']:4d} disp")
for x in rows("q35p.json"):
    tot = sum(p['ms'] for p in x['profile']); d = sum(p['ms'] for p in x['profile'] if p['op'] == 'attn_output')
    print(f"-- qwen3.5-4b {x['test']} GPU total {tot:.3f} ms, delta rule (attn_output) {d:.3f} ms = {100*d/max(tot,1e-9):.1f} %")
PY
