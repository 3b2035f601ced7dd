#!/usr/bin/env bash
# Session 6's figures with the int8-dot decode matvec as NVIDIA's default (mmv.q8 = 64), one call:
#  1. lab/h200-serve.sh: roofline, bench pp512/tg128 (-r 3), [N2] TTFT / gap of a warm server;
#  2. lab/h200-prefix-cache.sh: [N3] cold / warm / RAM / restart for a 5,000-token prefix + 50;
#  3. bench -p 512,4096 -n 128 -d 0,8192 (-r 2): [N5]'s rows; tg128 @ d8192 again with
#     ROCKY_ATTN_SPLIT=64 (shorter decode-attention chunks: the split's share at depth);
#  4. bench -npl 1,2,4,8 (-r 2) and --profile -n 16 (GPU ms per op of a decode token);
#  5. the 7B synth: tg128 (-r 2).
# Usage on the device: bash lab/h200-s6.sh (prints tables last).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=".devpack/run rocky"; M=/tmp/q3b.gguf
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
ln -sf $M /tmp/qwen2.5-3b-q4_k_m.gguf
OUT=$O bash lab/h200-serve.sh > "$O/serve.txt" 2>&1 || echo "serve lab failed"
cp lab/h200-prefix-cache.sh .devpack/ && OUT=$O timeout 200 .devpack/h200-prefix-cache.sh > "$O/prefix.txt" 2>&1 || echo "prefix lab failed"
timeout 150 $R bench -m $M -p 512,4096 -n 128 -d 0,8192 -ub 512 -r 2 --no-roofline -o json > "$O/depth.json" 2> "$O/depth.err" || echo "bench -d failed"
ROCKY_ATTN_SPLIT=64 timeout 60 $R bench -m $M -p 0 -n 128 -d 8192 -ub 512 -r 2 --no-roofline -o json > "$O/split64.json" 2> "$O/split64.err" || echo "bench split64 failed"
timeout 120 $R bench -m $M -p 512 -n 64 -npl 1,2,4,8 -ub 512 -r 2 --no-roofline -o json > "$O/npl.json" 2> "$O/npl.err" || echo "bench -npl failed"
timeout 60 $R bench -m $M -p 0 -n 16 -ub 512 -r 1 --no-roofline --profile -o json > "$O/prof.json" 2> "$O/prof.err" || echo "bench --profile failed"
[ -s /tmp/q7b.gguf ] || timeout 150 $R synth --preset qwen2.5-7b --type q4_k_m -q -o /tmp/q7b.gguf > /dev/null 2>&1 || echo synth 7b failed
timeout 60 $R bench -m /tmp/q7b.gguf -p 0 -n 128 -r 2 --no-roofline -o json > "$O/q7b.json" 2> "$O/q7b.err" || echo "bench 7b failed"
tail -12 "$O/serve.txt"; tail -8 "$O/prefix.txt"
python3 - "$O" <<'PY'
import json, os, sys
o = sys.argv[1]
def load(f):
    try: return json.load(open(os.path.join(o, f)))
    except Exception as e: print(f"{f}: {e}"); return []
print("| run | test | t/s | ± |")
print("| --- | --- | ---: | ---: |")
for f in ("depth.json", "split64.json", "npl.json", "q7b.json"):
    for r in load(f):
        print(f"| {f[:-5]} | {r['test']} | {r['avg_ts']:.1f} | {r.get('stddev_ts',0):.1f} |")
for r in load("prof.json"):
    ps = r.get("profile") or []
    if ps:
        tot = sum(p["ms"] for p in ps)
        print(f"\n{r['test']}: GPU {tot:.3f} ms: " + ", ".join(f"{p['op']} {p['ms']:.3f}/{p['dispatches']}" for p in sorted(ps, key=lambda p: -p["ms"])))
PY
