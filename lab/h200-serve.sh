#!/usr/bin/env bash
# One device call for [N1]/[N2]/[N4] figures on the synth qwen2.5-3b Q4_K_M model: roofline,
# `rocky bench` pp512/tg128 at ub 512 (with nvidia-smi's peak), an idle server's nvidia-smi figure,
# then a warm `rocky serve -ub 512` measured by lab/ttft.py (median TTFT of 10 prompts of 512
# tokens, mean gap between 128 streamed tokens) — [N2]'s bar: TTFT within 5 % of bench's pp512
# time, gap ≤ bench's tg ms/token + 0.2 ms. Usage on the device, from the repository root after
# `../shared/device/pack.sh .devpack build/rocky`: bash lab/h200-serve.sh (prints a table last).
set -u
R=".devpack/run rocky"
O=${OUT:-/tmp/out}; mkdir -p "$O"
M=/tmp/q3b.gguf
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
$R roofline --reps 3 --json > "$O/roofline.json" 2> "$O/roofline.err" || tail -3 "$O/roofline.err"
[[ -f $M ]] || timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
nvidia-smi --query-gpu=memory.used,clocks.sm --format=csv,noheader,nounits -lms 100 > "$O/smi-bench.txt" 2>/dev/null &
smi=$!
timeout 240 $R bench -m $M -p 512 -n 128 -ub 512 -r ${REPS:-3} --roofline-json "$O/roofline.json" -o json -q \
  > "$O/bench.json" 2> "$O/bench.err" || tail -3 "$O/bench.err"
kill $smi 2>/dev/null
$R serve -m $M -ub 512 -c 4096 --port 8080 ${SERVE_FLAGS:-} > /dev/null 2> "$O/serve.err" &
srv=$!
for i in $(seq 1 600); do curl -sf http://127.0.0.1:8080/health 2>/dev/null | grep -q '"ok"' && break; sleep 0.2; done
sleep 1
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits > "$O/smi-idle.txt"
nvidia-smi --query-gpu=clocks.sm --format=csv,noheader,nounits -lms 50 > "$O/smi-clk.txt" 2>/dev/null &
clk=$!
python3 lab/ttft.py --url http://127.0.0.1:8080 --prompt-tokens 512 --runs 10 --gen 128 > "$O/ttft.txt" 2>&1
kill $clk 2>/dev/null
kill -TERM $srv; wait $srv
python3 - "$O" <<'PY'
import json, sys, os
o = sys.argv[1]
r = json.load(open(os.path.join(o, "roofline.json")))
print(f"roofline fp32 {r['fp32_tflops']:.1f} TFLOPS, int8 {r['int8_dot_tops']:.1f} TOPS, copy {r['copy_gbs']:.0f} GB/s")
rows_smi = [l.split(",") for l in open(os.path.join(o, "smi-bench.txt")).read().splitlines() if "," in l]
smi = [int(r[0]) for r in rows_smi if r[0].strip().isdigit()]
bclk = sorted(int(r[1]) for r in rows_smi if len(r) > 1 and r[1].strip().isdigit())
print(f"nvidia-smi peak during bench {max(smi) if smi else '?'} MiB; idle server {open(os.path.join(o, 'smi-idle.txt')).read().strip()} MiB")
if bclk:
    print(f"SM clock during bench: median {bclk[len(bclk) // 2]} MHz, {100 * sum(c < 1500 for c in bclk) / len(bclk):.0f} % of samples < 1500")
rows = json.load(open(os.path.join(o, "bench.json")))
pp_ms = tg_ms = None
for row in rows:
    print(f"{row['test']:8} {row['avg_ts']:10.1f} ± {row['stddev_ts']:.1f} t/s  peak {row.get('peak_device_memory', 0) / 2**20:.0f} MiB"
          f"  memory {json.dumps(row.get('memory', {}))}")
    if row['test'].startswith('pp'): pp_ms = 1000 * row['n_prompt'] / row['avg_ts']
    if row['test'].startswith('tg'): tg_ms = 1000 / row['avg_ts']
t = open(os.path.join(o, "ttft.txt")).read()
print("\n".join(t.strip().splitlines()[:-1]) if t.strip() else "ttft: no output")
clk = sorted(int(x) for x in open(os.path.join(o, "smi-clk.txt")).read().split() if x.isdigit())
if clk:
    print(f"SM clock during ttft.py: median {clk[len(clk) // 2]} MHz, max {clk[-1]}, {100 * sum(c < 1500 for c in clk) / len(clk):.0f} % of samples < 1500")
try:
    j = json.loads(t.strip().splitlines()[-1])
    print(f"N2: TTFT {j['ttft_median_ms']:.2f} ms vs bench pp512 {pp_ms:.2f} ms ({100 * (j['ttft_median_ms'] / pp_ms - 1):+.1f} %, bar ±5 %); "
          f"gap {j['gap_mean_ms']:.3f} ms vs tg {tg_ms:.3f} ms/token ({j['gap_mean_ms'] - tg_ms:+.3f} ms, bar ≤ +0.2)")
except Exception as e:
    print("ttft parse:", e, t[-800:])
PY
