#!/usr/bin/env bash
# [N8] rocky tune on the H200, starting from the generic profile: pp512 (ub 512) of synth qwen2.5-3b
# q4_k_m with the hand-made nvidia profile, the generic one, `rocky tune --quick` and a full
# `rocky tune` (each loaded the way users get it: from $XDG_CACHE_HOME/rocky/profiles). Done-when:
# quick ≥ 95 % and full ≥ 100 % of the nvidia profile's pp512.
# Two device calls (each ≤ 10 min), from the repository root on the device (after
# ../shared/device/pack.sh .devpack build/rocky, copying this script to .devpack/):
#   STAGE=quick .devpack/h200-tune.sh   # synth, nvidia / generic baselines, tune --quick, bench   (~4 min)
#   STAGE=full  .devpack/h200-tune.sh   # full tune (resumes when a call ran out), bench            (≤ 9 min)
# Writes $OUT/* (the profiles, tune's stderr, bench JSON) and prints a table last.
set -u
D=$(cd "$(dirname "$0")" && pwd); R="$D/run rocky"; O=${OUT:-/tmp/out}; mkdir -p "$O"
STAGE=${STAGE:-quick}; REPS=${REPS:-5}; M=/tmp/q3b.gguf; W=/tmp/rocky-tune; mkdir -p "$W"
B="-m $M -p 512 -n 0 -ub 512 -r $REPS --no-roofline -o json"
[[ -f $M ]] || { time timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M 2>&1 | tail -2; }
bench() {  # NAME, then env assignments for the run
  local n=$1; shift
  env "$@" timeout 120 $R bench $B > "$O/bench_$n.json" 2> "$O/bench_$n.err" || tail -5 "$O/bench_$n.err"
  grep -E "tuning profile|tiles:" "$O/bench_$n.err" | head -2 | sed "s/^/[$n] /"
}
if [[ $STAGE == quick ]]; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$O/gpu.txt" 2>&1
  $R devices > "$O/devices.txt" 2>&1; head -4 "$O/devices.txt"
  echo '{"profile": "generic"}' > "$W/generic.json"
  bench nvidia XDG_CACHE_HOME="$W/none"
  bench generic XDG_CACHE_HOME="$W/none" ROCKY_TUNE="$W/generic.json"
  /usr/bin/time -f "tune --quick: %e s" env XDG_CACHE_HOME="$W/quick" timeout 300 $R tune --quick --start-profile generic -m $M \
    > "$O/tune_quick.out" 2> "$O/tune_quick.err" || tail -5 "$O/tune_quick.err"
  tail -4 "$O/tune_quick.err"; cp "$W"/quick/rocky/profiles/*.json "$O/profile_quick.json" 2>/dev/null
  bench quick XDG_CACHE_HOME="$W/quick"
else
  # A full run that a call's limit stopped resumes from its file on the next STAGE=full call.
  /usr/bin/time -f "tune (full): %e s" env XDG_CACHE_HOME="$W/full" timeout 500 $R tune --start-profile generic -m $M \
    > "$O/tune_full.out" 2> "$O/tune_full.err" || { echo "tune stopped (rerun STAGE=full to resume)"; tail -3 "$O/tune_full.err"; }
  tail -4 "$O/tune_full.err"; cp "$W"/full/rocky/profiles/*.json "$O/profile_full.json" 2>/dev/null
  bench full XDG_CACHE_HOME="$W/full"
  for n in nvidia generic quick; do [[ -f $W/bench_$n.json ]] && cp "$W/bench_$n.json" "$O/"; done
fi
for n in nvidia generic quick full; do [[ -f $O/bench_$n.json ]] && cp "$O/bench_$n.json" "$W/"; done
python3 - "$O" "$W" <<'PY'
import json, sys, os
o, w = sys.argv[1], sys.argv[2]
def pp(n):
    for d in (o, w):
        try:
            rows = json.load(open(os.path.join(d, f"bench_{n}.json")))
            return next(r["avg_ts"] for r in rows if r["test"] == "pp512"), rows[0].get("tiles", "")
        except Exception:
            pass
    return None, ""
base, _ = pp("nvidia")
print(f"{'profile':28} {'pp512 t/s':>10} {'vs nvidia':>9}  tiles")
for n, label in (("nvidia", "hand-made nvidia"), ("generic", "hand-made generic"),
                 ("quick", "tune --quick (from generic)"), ("full", "tune (from generic)")):
    v, tiles = pp(n)
    if v is None: print(f"{label:28} {'-':>10}"); continue
    pct = f"{100 * v / base:8.1f}%" if base else "-"
    print(f"{label:28} {v:10.1f} {pct:>9}  {tiles[:150]}")
PY
