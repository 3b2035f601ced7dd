#!/usr/bin/env bash
# [N5]/[N2] prefill and decode at KV depth on the synth qwen2.5-3b Q4_K_M model: `rocky bench -d`
# with the split decode attention (default) and without it (ROCKY_ATTN_SPLIT=0). Usage on the
# device after pack.sh: bash lab/h200-depth.sh (prints a table).
set -u
R=".devpack/run rocky"; M=/tmp/q3b.gguf; O=${OUT:-/tmp/out}; mkdir -p "$O"
[[ -f $M ]] || timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
$R bench -m $M -p 512 -n 128 -d ${DEPTHS:-0,2,1500,4096} -ub 512 -r 2 --no-roofline -o json -q > "$O/depth.json" 2> "$O/depth.err" || tail -3 "$O/depth.err"
ROCKY_ATTN_SPLIT=0 $R bench -m $M -p 0 -n 128 -d ${DEPTHS_NOSPLIT:-1500,4096} -ub 512 -r 2 --no-roofline -o json -q > "$O/depth-nosplit.json" 2> "$O/depth-nosplit.err" || tail -3 "$O/depth-nosplit.err"
python3 - "$O" <<'PY'
import json, os, sys
o = sys.argv[1]
for f, tag in (("depth.json", "split"), ("depth-nosplit.json", "ROCKY_ATTN_SPLIT=0")):
    for r in json.load(open(os.path.join(o, f))):
        n = r["n_prompt"] or r["n_gen"]
        print(f"{tag:18} {r['test']:16} {r['avg_ts']:9.1f} ± {r['stddev_ts']:6.1f} t/s  {1000 * n / r['avg_ts']:8.2f} ms  {r['tflops']:.2f} TFLOP/s")
PY
