#!/usr/bin/env bash
# [N6] pp512 / tg128 of the new architectures' Q4_K_M synth presets on the H200 (one device call),
# against qwen2.5-3b on the same kernels: qwen3-4b, llama-3.2-3b, gemma-3-4b (full depth and vocab).
# Done-when: each prefill TFLOP/s within 15 % of qwen2.5-3b's. Writes $OUT/*.json; prints a table.
# Usage from the repository root on the device (after ../shared/device/pack.sh .devpack build/rocky,
# copying this script to .devpack/): .devpack/h200-n6-models.sh
set -u
D=$(cd "$(dirname "$0")" && pwd); R="$D/run rocky"; O=${OUT:-/tmp/out}; mkdir -p "$O"
REPS=${REPS:-5}; UB=${UB:-512}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$O/gpu.txt" 2>&1
timeout 120 $R roofline --reps 5 --json > "$O/roofline.json" 2> "$O/roofline.err"
RJ="--roofline-json $O/roofline.json"
for m in ${MODELS:-qwen2.5-3b qwen3-4b llama-3.2-3b gemma-3-4b}; do
  timeout 300 $R synth --preset "$m" --type q4_k_m -q -o "/tmp/$m.gguf" 2>&1 | tail -1
  timeout 300 $R bench -m "/tmp/$m.gguf" -p 512 -n 128 -ub "$UB" -r "$REPS" $RJ -o json > "$O/$m.json" 2> "$O/$m.err" ||
    tail -3 "$O/$m.err"
  rm -f "/tmp/$m.gguf"
done
python3 - "$O" ${MODELS:-qwen2.5-3b qwen3-4b llama-3.2-3b gemma-3-4b} <<'PY'
import json, sys, os
o, models = sys.argv[1], sys.argv[2:]
base = None
print(f"{'model':14} {'test':7} {'t/s':>10} {'TFLOP/s':>8} {'vs qwen2.5-3b':>13} {'matmul':>10}")
for m in models:
    try: rows = json.load(open(os.path.join(o, m + ".json")))
    except Exception as e: print(f"{m:14} no result ({e})"); continue
    for x in rows:
        pp = x["test"].startswith("pp")
        if m == "qwen2.5-3b" and pp: base = x["tflops"]
        rel = f"{100 * x['tflops'] / base:12.1f}%" if pp and base else ""
        print(f"{m:14} {x['test']:7} {x['avg_ts']:10.1f} {x['tflops']:8.2f} {rel:>13} {x['matmul_path']:>10}")
PY
