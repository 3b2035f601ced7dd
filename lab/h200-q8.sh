#!/usr/bin/env bash
# [N4][N7] The int8-dot decode matvec (fast::matvec_q8, ROCKY_MMV_Q8=N: matmuls of ≤ N tokens)
# against the f32-activation matvec (ROCKY_MMV_Q8=0), one device call, ≈ 5 min:
#  1. rocky roofline (copy bandwidth for the % columns);
#  2. bench-op at decode's conditions, --kernel mmv vs mmv-q8, N = 1 and 4, the qwen2.5-3b shapes
#     (ffn_up/gate, ffn_down, attn_q/out, attn_k, the q6_K head and ffn_down), and N = 50 of
#     ffn_up against mul_mmq (a short ubatch);
#  3. bench pp512 + tg128, -npl 1,2,4,8 and pp16/pp50 @ d5000 with ROCKY_MMV_Q8=0 / 8 (/ 64);
#  4. bench --profile -n 16 -npl 1,4 with ROCKY_MMV_Q8=8 (GPU time per op).
# Usage on the device: bash lab/h200-q8.sh (writes $OUT/*.json, prints tables last).
# Locally (SKIP_OP=1: no bench-op): SKIP_OP=1 R=./build/rocky M=/tmp/small.gguf P=16 NG=4 DEV="--device vulkan:0" bash lab/h200-q8.sh
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
R=${R:-.devpack/run rocky}; M=${M:-/tmp/q3b.gguf}; P=${P:-512}; NG=${NG:-128}; DEV=${DEV:-}
timeout 60 $R roofline --reps 3 --json $DEV > "$O/roof.json" 2> "$O/roof.err" || echo "roofline failed"
: > "$O/op.jsonl"
[ -n "${SKIP_OP:-}" ] || for spec in "q4_K 11008 2048" "q4_K 2048 11008" "q4_K 2048 2048" "q4_K 256 2048" "q6_K 151936 2048" "q6_K 2048 11008"; do
  set -- $spec
  for N in 1 4; do
    for k in mmv mmv-q8; do
      timeout 60 $R bench-op --type $1 --shape $2,$N,$3 --kernel $k --reps 20 --no-roofline --json $DEV 2>> "$O/op.err" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >> "$O/op.jsonl" || echo "bench-op $spec N=$N $k failed"
    done
  done
done
[ -n "${SKIP_OP:-}" ] || for k in mmv-q8 mmq; do
  timeout 60 $R bench-op --type q4_K --shape 11008,50,2048 --kernel $k --reps 20 --no-roofline --json $DEV 2>> "$O/op.err" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >> "$O/op.jsonl" || echo "bench-op N=50 $k failed"
done
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
for Q in 0 8; do
  ROCKY_MMV_Q8=$Q timeout 90 $R bench -m $M -p $P -n $NG $DEV -ub $P -r 3 --no-roofline -o json > "$O/tg$Q.json" 2> "$O/tg$Q.err" || echo "bench Q8=$Q failed"
  ROCKY_MMV_Q8=$Q timeout 120 $R bench -m $M -p $P -n 64 -npl 1,2,4,8 $DEV -ub $P -r 2 --no-roofline -o json > "$O/npl$Q.json" 2> "$O/npl$Q.err" || echo "bench -npl Q8=$Q failed"
done
for Q in 0 64; do
  ROCKY_MMV_Q8=$Q timeout 90 $R bench -m $M -p 16,50 -n 0 -d 5000 $DEV -ub $P -r 3 --no-roofline -o json > "$O/d5k$Q.json" 2> "$O/d5k$Q.err" || echo "bench d5000 Q8=$Q failed"
done
ROCKY_MMV_Q8=8 timeout 90 $R bench -m $M -p $P -n 16 -npl 1,4 $DEV -ub $P -r 1 --no-roofline --profile -o json > "$O/prof8.json" 2> "$O/prof8.err" || echo "bench --profile failed"
python3 - "$O" <<'PY'
import json, os, sys
o = sys.argv[1]
def load(f):
    try: return json.load(open(os.path.join(o, f)))
    except Exception as e: print(f"{f}: {e}"); return []
roof = load("roof.json") or {}
copy = (roof.get("copy_gbs") if isinstance(roof, dict) else None) or 0
print(f"copy bandwidth {copy:.0f} GB/s")
print("| type | M | N | K | kernel | µs | GB/s | % copy | NMSE |")
print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
for line in open(os.path.join(o, "op.jsonl")):
    try: j = json.loads(line)
    except Exception: continue
    ms = j.get("matvec_ms", j.get("mul_mmq_ms", 0))
    gbs = j.get("gbs", 0)
    print(f"| {j['type']} | {j['M']} | {j['N']} | {j['K']} | {j['kernel']} | {ms*1e3:.1f} | {gbs:.0f} | {100*gbs/copy if copy else 0:.1f} | {j.get('nmse_sampled',0):.1e} |")
print("\n| run | test | t/s | ± |")
print("| --- | --- | ---: | ---: |")
for f in ("tg0.json", "tg8.json", "npl0.json", "npl8.json", "d5k0.json", "d5k64.json"):
    for r in load(f):
        print(f"| {f[:-5]} | {r['test']} | {r['avg_ts']:.1f} | {r.get('stddev_ts',0):.1f} |")
prof = {r["test"]: r.get("profile") or [] for r in load("prof8.json") if r.get("profile")}
for t, ps in prof.items():
    tot = sum(p["ms"] for p in ps)
    top = sorted(ps, key=lambda p: -p["ms"])[:12]
    print(f"\n{t}: GPU {tot:.3f} ms: " + ", ".join(f"{p['op']} {p['ms']:.3f}" for p in top))
PY
