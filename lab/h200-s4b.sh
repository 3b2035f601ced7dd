#!/usr/bin/env bash
# Session 4, one device call: the new built-in nvidia profile (pp512, tg128 of qwen2.5-3b), the
# pp4096 per-op profile ([N5]: attention's share), and gemma-3-4b ([N6]): pp512 with the built-in
# profile, then a full `rocky tune -m gemma --start-profile nvidia` (its hd256 attention tiles) and
# pp512 + per-op profile with the tuned file. Usage on the device: bash lab/h200-s4b.sh
set -u
R="$PWD/.devpack/run rocky"; O=${OUT:-/tmp/out}; mkdir -p "$O"; M=/tmp/q3b.gguf; G=/tmp/g.gguf
[[ -f $M ]] || timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1
[[ -f $G ]] || timeout 200 $R synth --preset gemma-3-4b --type q4_k_m -q -o $G > /dev/null 2>&1
export XDG_CACHE_HOME=/tmp/none
B="-ub 512 --no-roofline -o json -q"
timeout 120 $R bench -m $M $B -p 512 -n 128 -r 5 > "$O/q.json" 2> /tmp/q.err || tail -3 /tmp/q.err
timeout 120 $R bench -m $M $B -p 4096 -n 0 -r 1 --profile > "$O/q4k.json" 2> /tmp/q4k.err || tail -3 /tmp/q4k.err
timeout 90 $R bench -m $G $B -p 512 -n 0 -r 3 > "$O/g0.json" 2> /tmp/g0.err || tail -3 /tmp/g0.err
XDG_CACHE_HOME=/tmp/gt timeout 300 $R tune -m $G --start-profile nvidia > /tmp/gt.out 2> /tmp/gt.err || tail -3 /tmp/gt.err
grep -E "^tune: (attention|mul_mmq over)" /tmp/gt.err
cp /tmp/gt/rocky/profiles/*.json "$O/gemma_profile.json" 2>/dev/null
XDG_CACHE_HOME=/tmp/gt timeout 90 $R bench -m $G $B -p 512 -n 0 -r 3 > "$O/g1.json" 2> /tmp/g1.err || tail -3 /tmp/g1.err
XDG_CACHE_HOME=/tmp/gt timeout 90 $R bench -m $G $B -p 512 -n 0 -r 1 --profile > "$O/g1p.json" 2> /tmp/g1p.err
python3 - "$O" <<'PY'
import json, sys, os
o = sys.argv[1]
for f, t in (("q.json", "qwen builtin"), ("g0.json", "gemma builtin"), ("g1.json", "gemma tuned")):
    try:
        for x in json.load(open(os.path.join(o, f))):
            print(f"{t:14} {x['test']:8} {x['avg_ts']:9.1f} ± {x['stddev_ts']:6.1f} t/s  {x.get('tflops', 0):.2f} TFLOP/s  {x.get('tiles','')[:120]}")
    except Exception as e: print(t, "failed", e)
for f in ("q4k.json", "g1p.json"):
    try:
        for row in json.load(open(os.path.join(o, f))):
            tot = sum(p['ms'] for p in row['profile'])
            print(f"-- {f} {row['test']} total {tot:.3f} ms")
            for p in sorted(row['profile'], key=lambda p: -p['ms'])[:8]:
                print(f"   {p['op']:30} {p['ms']:8.3f} ms {p['dispatches']:4d} disp")
    except Exception as e: print(f, "failed", e)
PY
