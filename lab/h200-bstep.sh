#!/usr/bin/env bash
# [N7] Where a batched decode step's time goes (helper bstep, round 4). One device call, ≈ 4 min:
#  1. bench -p $P -n $NG -npl 1,2,4,8 $DEV: pp512, tg128 and the aggregate decode of 1 … 8 sequences,
#     each -npl row with its host split per step (step ms, record, submit_wait, dispatches, replayed);
#  2. tg128 @ d512: one sequence's ordinary decode at the -npl rows' depth (512 … 640), to separate
#     the depth (split attention) from the multi-sequence path in "x1" against "tg128";
#  3. bench --profile -n 16 -npl 1,4: GPU time per op of the last 1- and 4-sequence step
#     (timestamps serialize the dispatches; the replay is off while profiling);
#  4. -npl 1,4 with ROCKY_ATTN_SPLIT=0 (no split attention): the split's share of the step;
#  5. -npl 2,4,8 with ROCKY_MMV_COL_SPLIT=0 and =2 (the multi-column matvec's whole / quarter-block
#     steps for every n; the rule takes 0 at n = 2, 1 at 3 … 4, 2 at 5 … 8): its share of the step.
# Then a python3 table. Usage on the device: bash lab/h200-bstep.sh (writes $OUT/*.json).
# Locally (lavapipe, a small model): R=./build/rocky M=/tmp/small.gguf P=16 NG=4 DEV="--device vulkan:0" bash lab/h200-bstep.sh
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
R=${R:-.devpack/run rocky}; M=${M:-/tmp/q3b.gguf}; P=${P:-512}; NG=${NG:-128}; DEV=${DEV:-}
[ -s $M ] || timeout 120 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
timeout 150 $R bench -m $M -p $P -n $NG -npl 1,2,4,8 $DEV -ub $P -r 2 --no-roofline -o json > "$O/npl.json" 2> "$O/npl.err" || echo "bench -npl failed (rc $?)"
timeout 60 $R bench -m $M -p 0 -n $NG -d $P $DEV -ub $P -r 2 --no-roofline -o json > "$O/d512.json" 2> "$O/d512.err" || echo "bench -d 512 failed (rc $?)"
timeout 90 $R bench -m $M -p $P -n 16 -npl 1,4 $DEV -ub $P -r 1 --no-roofline --profile -o json > "$O/prof.json" 2> "$O/prof.err" || echo "bench --profile failed (rc $?)"
ROCKY_ATTN_SPLIT=0 timeout 90 $R bench -m $M -p $P -n 64 -npl 1,4 $DEV -ub $P -r 2 --no-roofline -o json > "$O/nosplit.json" 2> "$O/nosplit.err" || echo "bench ROCKY_ATTN_SPLIT=0 failed (rc $?)"
for S in 0 2; do
  ROCKY_MMV_COL_SPLIT=$S timeout 90 $R bench -m $M -p $P -n 64 -npl 2,4,8 $DEV -ub $P -r 2 --no-roofline -o json > "$O/colsplit$S.json" 2> "$O/colsplit$S.err" || echo "bench ROCKY_MMV_COL_SPLIT=$S failed (rc $?)"
done
python3 - "$O" <<'EOF'
import json, os, sys
o = sys.argv[1]
def rows(f):
    try:
        return json.load(open(os.path.join(o, f)))
    except Exception as e:
        print(f"{f}: {e}")
        return []
print("| run | test | t/s | ms/step | record | submit_wait | setup | readback | dispatches | replayed |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for f in ("npl.json", "d512.json", "nosplit.json", "colsplit0.json", "colsplit2.json"):
    for r in rows(f):
        h = r.get("host_ms_per_ubatch") or {}
        npl = max(1, r.get("n_pl", 0) or 1)
        step = h.get("step", (1e3 / r["avg_ts"]) * npl if r.get("avg_ts") else 0)
        g = lambda k: f"{h[k]:.3f}" if k in h else "-"
        print(f"| {f[:-5]} | {r['test']} | {r['avg_ts']:.1f} | {step:.3f} | {g('record')} | {g('submit_wait')} | "
              f"{g('setup')} | {g('readback')} | {g('dispatches')} | {g('replayed')} |")
prof = {r["test"]: r.get("profile") or [] for r in rows("prof.json") if "x" in r["test"]}
keys = sorted(prof)
if len(keys) >= 2:
    a, b = {p["op"]: p for p in prof[keys[0]]}, {p["op"]: p for p in prof[keys[-1]]}
    ta, tb = sum(p["ms"] for p in a.values()), sum(p["ms"] for p in b.values())
    print(f"\nGPU ms per op of one step (profiled; {keys[0]}: {ta:.3f} ms, {keys[-1]}: {tb:.3f} ms)")
    print(f"| op | dispatches | {keys[0]} ms | {keys[-1]} ms | Δ ms |")
    print("| --- | ---: | ---: | ---: | ---: |")
    ops = sorted(set(a) | set(b), key=lambda k: -(b.get(k, {"ms": 0})["ms"] - a.get(k, {"ms": 0})["ms"]))
    for k in ops:
        pa, pb = a.get(k, {"ms": 0, "dispatches": 0}), b.get(k, {"ms": 0, "dispatches": 0})
        print(f"| {k} | {pa['dispatches']}/{pb['dispatches']} | {pa['ms']:.3f} | {pb['ms']:.3f} | {pb['ms'] - pa['ms']:+.3f} |")
EOF
