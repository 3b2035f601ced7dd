#!/usr/bin/env bash
# [N9] The chunked gated-delta-rule prefill kernel (gated_delta_chunk.comp) against the serial one
# (gated_delta.comp, ROCKY_DELTA_CHUNK=0) on the qwen3.5-4b synth Q4_K_M (24 Gated DeltaNet + 8
# gated-attention layers; H_v 32, d_k = d_v 128), one device call:
#   1. rocky verify of a 4-layer synth (3 recurrent + 1 attention layer; a ≈ 340-token prompt in
#      ubatches of 128: the state carried across chunks and ubatches) with the chunked kernel
#      (default) and the serial one: both within the int8 path's bound;
#   2. bench -p 512,4096 -n 0 -ub 512 with chunks of 32 (the default), 16, 64 and the serial kernel;
#   3. bench --profile of pp512 and pp4096 with the default chunk and the serial kernel: the delta
#      rule's share of the GPU time (node attn_output = GATED_DELTA in qwen35.cpp).
# Prints a table last. Writes $OUT/*.
# Usage from the repository root on the device: bash lab/h200-delta.sh
# (locally, e.g. on lavapipe: R=build/rocky PRESET=qwen3.5-0.8b LAYERS=4 PP=64,128 bash lab/h200-delta.sh)
set -u
R=${R:-.devpack/run rocky}; O=${OUT:-/tmp/out}; mkdir -p "$O"
PRESET=${PRESET:-qwen3.5-4b}; LAYERS=${LAYERS:-}; PP=${PP:-512,4096}; UB=${UB:-512}; REPS=${REPS:-3}
M=/tmp/delta-model.gguf; MV=/tmp/delta-verify.gguf
LFLAG=""; [ -n "$LAYERS" ] && LFLAG="--layers $LAYERS"
timeout 400 $R synth --preset "$PRESET" --type q4_k_m $LFLAG -q -o $M > "$O/synth.log" 2>&1 || tail -3 "$O/synth.log"
timeout 200 $R synth --preset "$PRESET" --type q4_k_m --layers 4 -q -o $MV > /dev/null 2>&1 || echo "synth (verify) failed"
VP=$(python3 -c 'print("The quick brown fox jumps over the lazy dog, and the delta rule carries its state. " * 20)')
for mode in chunk serial; do
  if [ $mode = serial ]; then export ROCKY_DELTA_CHUNK=0; else unset ROCKY_DELTA_CHUNK; fi
  timeout 200 $R verify -m $MV -p "$VP" -ub 128 --json > "$O/verify-$mode.json" 2> "$O/verify-$mode.err"
  echo "$?" > "$O/verify-$mode.rc"
done
unset ROCKY_DELTA_CHUNK
for c in 32 16 64 0; do
  ROCKY_DELTA_CHUNK=$c timeout 300 $R bench -m $M -p "$PP" -n 0 -ub "$UB" -r "$REPS" --no-roofline -o json \
    > "$O/bench-c$c.json" 2> "$O/bench-c$c.err" || tail -3 "$O/bench-c$c.err"
done
for c in 32 0; do
  ROCKY_DELTA_CHUNK=$c timeout 300 $R bench -m $M -p "$PP" -n 0 -ub "$UB" -r 1 --profile --no-roofline -o json \
    > "$O/profile-c$c.json" 2> "$O/profile-c$c.err" || tail -3 "$O/profile-c$c.err"
done
rm -f $M $MV
python3 - "$O" <<'PY'
import json, sys, os
o = sys.argv[1]
def load(name):
    try: return json.load(open(os.path.join(o, name)))
    except Exception as e: print(f"{name}: no result ({e})"); return None
for mode in ("chunk", "serial"):
    v = load(f"verify-{mode}.json"); rc = open(os.path.join(o, f"verify-{mode}.rc")).read().strip()
    if v is not None:
        keys = [k for k in ("ok", "n_tokens", "top1_agreement", "max_abs_logit_diff", "rel", "tolerance") if k in v]
        print(f"verify ({mode}): exit {rc}; " + ", ".join(f"{k} {v[k]}" for k in keys))
    else: print(f"verify ({mode}): exit {rc}")
print(f"{'kernel':12} {'test':8} {'t/s':>10} {'± sd':>8}")
for c in ("32", "16", "64", "0"):
    rows = load(f"bench-c{c}.json") or []
    for x in rows:
        name = "serial" if c == "0" else f"chunk {c}"
        print(f"{name:12} {x['test']:8} {x['avg_ts']:10.1f} {x.get('stddev_ts', 0):8.1f}")
print(f"{'kernel':12} {'test':8} {'GPU ms':>9} {'delta ms':>9} {'share':>7} {'dispatches':>10}")
for c in ("32", "0"):
    for x in load(f"profile-c{c}.json") or []:
        ops = x.get("profile") or []
        tot = sum(p["ms"] for p in ops)
        d = [p for p in ops if p["op"] == "attn_output"]
        dm = sum(p["ms"] for p in d); dn = sum(p["dispatches"] for p in d)
        name = "serial" if c == "0" else f"chunk {c}"
        if tot > 0: print(f"{name:12} {x['test']:8} {tot:9.2f} {dm:9.3f} {100*dm/tot:6.1f}% {dn:10}")
PY
