#!/usr/bin/env bash
# [N9] Qwen3.5-4B (hybrid: 24 Gated DeltaNet + 8 gated-attention layers) synth Q4_K_M on the H200,
# one device call: pp512, pp4096 and tg128 on the default path (int8 prefill, f16 KV), then --profile
# of pp512 (ub 512) and of one decode token: the linear-attention layers' share of the GPU time, and
# the delta-rule kernel (gated_delta.comp: the state read and written once per ubatch, the tokens in
# sequence) in GB/s of state traffic and TFLOP/s (≈ 7·d_k·d_v per value head and token).
# Writes $OUT/*; prints a table last.
# Usage from the repository root on the device (after ../shared/device/pack.sh .devpack build/rocky,
# copying this script to .devpack/): .devpack/h200-qwen35.sh
set -u
D=$(cd "$(dirname "$0")" && pwd); R="$D/run rocky"; O=${OUT:-/tmp/out}; mkdir -p "$O"
REPS=${REPS:-3}; UB=${UB:-512}; M=/tmp/qwen3.5-4b.gguf
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$O/gpu.txt" 2>&1
timeout 120 $R roofline --reps 5 --json > "$O/roofline.json" 2> "$O/roofline.err"
RJ="--roofline-json $O/roofline.json"
time timeout 400 $R synth --preset qwen3.5-4b --type q4_k_m -q -o $M 2>&1 | tail -1
timeout 400 $R bench -m $M -p 512,4096 -n 128 -ub "$UB" -r "$REPS" $RJ -o json > "$O/bench.json" 2> "$O/bench.err" ||
  tail -3 "$O/bench.err"
timeout 200 $R bench -m $M -p 512 -n 1 -ub 512 -r 1 --profile $RJ -o json > "$O/profile.json" 2> "$O/profile.err" ||
  tail -3 "$O/profile.err"
python3 - "$O" <<'PY'
import json, sys, os
o = sys.argv[1]
try: r = json.load(open(os.path.join(o, "roofline.json"))); print(f"roofline: fp32 {r['fp32_tflops']:.1f} TFLOPS, int8dot {r['int8_dot_tops']:.1f} TOPS, copy {r['copy_gbs']:.0f} GB/s")
except Exception as e: r = {}; print("roofline: none", e)
try: rows = json.load(open(os.path.join(o, "bench.json")))
except Exception as e: rows = []; print("bench: no result", e)
print(f"{'test':8} {'t/s':>10} {'TFLOP/s':>8} {'GB/s':>8} {'% roof':>7} {'matmul':>7}")
for x in rows: print(f"{x['test']:8} {x['avg_ts']:10.1f} {x['tflops']:8.2f} {x.get('gbs', 0):8.1f} {x['roof_pct']:7.1f} {x['matmul_path']:>7}")
# Linear-attention ops (per-layer node names without blk.N., qwen35.cpp): the projections, conv,
# delta rule, its norm and gate, the output projection.
LIN = {"attn_qkv", "z", "beta", "alpha", "alpha_biased", "conv_output_silu", "conv_output_silu state",
       "attn_output", "delta_norm", "final_output", "linear_attn_out"}
H_v, d_k, d_v, n_rec = 32, 128, 128, 24
try: prof = json.load(open(os.path.join(o, "profile.json")))
except Exception as e: prof = []; print("profile: no result", e)
for x in prof:
    ops = x.get("profile") or []
    tot = sum(p["ms"] for p in ops)
    if tot <= 0: continue
    lin = sum(p["ms"] for p in ops if p["op"] in LIN)
    delta = sum(p["ms"] for p in ops if p["op"] == "attn_output")
    conv = sum(p["ms"] for p in ops if p["op"].startswith("conv_output_silu"))
    n = int(x["test"][2:]) if x["test"].startswith("pp") else 1
    n = min(n, x.get("n_ubatch", n))
    state_bytes = n_rec * H_v * d_k * d_v * 4 * 2  # read + write once per dispatch
    flops = n_rec * H_v * 7 * d_k * d_v * n
    print(f"[{x['test']} ub {x.get('n_ubatch')}] GPU {tot:.2f} ms: linear-attention layers' ops {lin:.2f} ms ({100*lin/tot:.1f} %), "
          f"delta rule {delta:.3f} ms ({100*delta/tot:.1f} %: {flops/delta/1e9:.2f} TFLOP/s, state {state_bytes/delta/1e6:.1f} GB/s), conv {conv:.3f} ms")
    for p in sorted(ops, key=lambda p: -p["ms"])[:12]: print(f"    {p['op']:24} {p['ms']:8.3f} ms  {p['dispatches']:4} dispatches")
PY
rm -f $M
