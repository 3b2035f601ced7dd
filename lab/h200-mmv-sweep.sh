#!/usr/bin/env bash
# [N4] decode on the H200 (one device call): tg128 / pp512 of the 3B synth (ROCKY_FUSE_DECODE=1 vs 0:
# rope_kv; ROCKY_FOLD_NORM=1: the folded norms), a decode profile (DEPTH=1: tg128 at depth 4096 /
# 8192), then a sweep of
# matvec_mmq shapes (ROCKY_MMV_SHAPE=WG,ROWS,SPLIT,UNROLL) with bench-op at N = 1 on the 3B's
# ffn_up, ffn_down, attn_q and the q6_K head: the best shape per matrix against the default.
# Usage on the device (after ../shared/device/pack.sh .devpack build/rocky): bash lab/h200-mmv-sweep.sh
set -u
R="$PWD/.devpack/run rocky"; O=${OUT:-/tmp/out}; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 60 $R roofline --reps 3 --json > "$O/roofline.json" 2> "$O/roofline.err"
RJ="--roofline-json $O/roofline.json"
timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o /tmp/m3.gguf > /dev/null 2>&1 || echo synth failed
B="-m /tmp/m3.gguf -ub 512 -r 3 $RJ -o json -q"
timeout 120 $R bench $B -p 512 -n 128 > "$O/b.json" 2> "$O/b.err"
ROCKY_FUSE_DECODE=0 timeout 90 $R bench $B -p 0 -n 128 > "$O/b-nofuse.json" 2> "$O/b-nofuse.err"
ROCKY_FOLD_NORM=1 timeout 90 $R bench $B -p 0 -n 128 > "$O/b-fold.json" 2> "$O/b-fold.err"
[ -n "${DEPTH:-}" ] && timeout 200 $R bench $B -p 0 -n 128 -d 4096,8192 > "$O/b-depth.json" 2> "$O/b-depth.err"
timeout 90 $R bench -m /tmp/m3.gguf -p 0 -n 16 -ub 512 -r 1 --profile --no-roofline -o json -q > "$O/prof.json" 2> "$O/prof.err"
: > "$O/sweep.txt"
for s in "q4_K 11008,1,2048 ffn_up" "q4_K 2048,1,11008 ffn_down" "q4_K 2048,1,2048 attn_q" "q6_K 151936,1,2048 head"; do
  set -- $s
  timeout 30 $R bench-op --type "$1" --shape "$2" --reps 20 --no-roofline --json > "$O/d.json" 2>/dev/null &&
    python3 -c "import json;j=json.load(open('$O/d.json'));print('$3 default',j['matvec_ms'],j['shape'])" >> "$O/sweep.txt"
  WGS="32 64 128 256"; RWS="1 2 4 8 16"
  [ "$3" = head ] && { WGS="32 64"; RWS="2 4 8"; }  # the head's random weights take seconds to make
  for wg in $WGS; do for rows in $RWS; do for un in 1 2; do
    [ "$rows" -gt "$wg" ] && continue
    ROCKY_MMV_SHAPE=$wg,$rows,0,$un timeout 30 $R bench-op --type "$1" --shape "$2" --reps 20 --no-roofline --json > "$O/s.json" 2>/dev/null &&
      python3 -c "import json;j=json.load(open('$O/s.json'));print('$3 $wg,$rows,0,$un',j['matvec_ms'])" >> "$O/sweep.txt"
  done; done; done
done
# tg128 with the two best ffn_up shapes applied to every matvec.
for sh in $(grep '^ffn_up [0-9]' "$O/sweep.txt" | sort -k3 -g | head -2 | awk '{print $2}'); do
  ROCKY_MMV_SHAPE=$sh timeout 90 $R bench $B -p 0 -n 128 > "$O/b-shape-$sh.json" 2> /dev/null
done
python3 - "$O" <<'PY'
import json, sys, os
o = sys.argv[1]
def rows(f, tag):
    try:
        for x in json.load(open(os.path.join(o, f))):
            h = x.get("host_ms_per_ubatch", {})
            print(f"{tag:10} {x['test']:14} {x['avg_ts']:9.1f} ± {x['stddev_ts']:5.1f} t/s  disp/tok {h.get('dispatches',0):5.0f}  peak {x.get('peak_device_memory',0)/2**20:.0f} MiB")
    except Exception as e: print(tag, "failed", e, open(os.path.join(o, f.replace('.json','.err'))).read()[-300:])
rows("b.json", "default"); rows("b-nofuse.json", "FUSE=0"); rows("b-fold.json", "FOLD=1")
if os.path.exists(os.path.join(o, "b-depth.json")): rows("b-depth.json", "depth")
for f in sorted(os.listdir(o)):
    if f.startswith("b-shape-"): rows(f, f[8:-5])
try:
    for row in json.load(open(os.path.join(o, "prof.json"))):
        tot = sum(p['ms'] for p in row['profile']); nd = sum(p['dispatches'] for p in row['profile'])
        print(f"-- {row['test']} profile total {tot:.3f} ms, {nd} dispatches")
        for p in sorted(row['profile'], key=lambda p: -p['ms'])[:14]:
            print(f"   {p['op']:28} {p['ms']:7.3f} ms {p['dispatches']:4d} disp {1000*p['ms']/max(1,p['dispatches']):6.1f} us/disp")
except Exception as e: print("profile failed", e)
best = {}; dflt = {}
for line in open(os.path.join(o, "sweep.txt")):
    f = line.split()
    if f[1] == "default": dflt[f[0]] = (float(f[2]), " ".join(f[3:])); continue
    ms = float(f[2]); best.setdefault(f[0], []).append((ms, f[1]))
for k, v in best.items():
    v.sort()
    d = dflt.get(k, (0, "?"))
    print(f"sweep {k:9} default {1000*d[0]:7.1f} us [{d[1]}]; best " + ", ".join(f"{s} {1000*m:.1f}" for m, s in v[:4]))
PY
