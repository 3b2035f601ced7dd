#!/usr/bin/env bash
# One device call at the end of a round, on the synth qwen2.5-3b Q4_K_M model: pp512/tg128 at ub 512
# (nvidia-smi peak beside rocky's own memory report), bench -d 4096,8192, an idle server's
# nvidia-smi figure, a warm server's TTFT/gap (lab/ttft.py) with the SM clock sampled every 50 ms,
# and the 5,000-token prefix-cache script. Usage on the device after pack.sh (copy
# lab/h200-prefix-cache.sh into .devpack/): bash lab/h200-round.sh — prints a table.
set -u
R=".devpack/run rocky"; M=/tmp/q3b.gguf; O=${OUT:-/tmp/out}; mkdir -p "$O"
[[ -f $M ]] || timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > /tmp/smi-bench.txt 2>/dev/null &
smi=$!
timeout 240 $R bench -m $M -p 512 -n 128 -ub 512 -r 3 --no-roofline -o json -q > /tmp/bench.json 2> /tmp/bench.err || tail -3 /tmp/bench.err
kill $smi 2>/dev/null
timeout 240 $R bench -m $M -p 512 -n 128 -d 4096,8192 -ub 512 -r 2 --no-roofline -o json -q > /tmp/depth.json 2> /tmp/depth.err || tail -3 /tmp/depth.err
$R serve -m $M -ub 512 -c 4096 --port 8080 > /dev/null 2> /tmp/serve.err &
srv=$!
for i in $(seq 1 600); do curl -sf http://127.0.0.1:8080/health 2>/dev/null | grep -q '"ok"' && break; sleep 0.2; done
sleep 1
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits > /tmp/smi-idle.txt
nvidia-smi --query-gpu=clocks.sm --format=csv,noheader,nounits -lms 50 > /tmp/clocks.txt 2>/dev/null &
clk=$!
python3 lab/ttft.py --url http://127.0.0.1:8080 --prompt-tokens 512 --runs 10 --gen 128 > /tmp/ttft.txt 2>&1
kill $clk 2>/dev/null
kill -TERM $srv; wait $srv
python3 - <<'PY'
import json
smi = [int(x) for x in open("/tmp/smi-bench.txt").read().split() if x.isdigit()]
print(f"nvidia-smi peak during bench {max(smi) if smi else '?'} MiB; idle rocky serve -c 4096: {open('/tmp/smi-idle.txt').read().strip()} MiB")
pp = tg = None
for f in ("/tmp/bench.json", "/tmp/depth.json"):
    for r in json.load(open(f)):
        n = r["n_prompt"] or r["n_gen"]
        print(f"{r['test']:16} {r['avg_ts']:9.1f} ± {r['stddev_ts']:5.1f} t/s  peak {r['peak_device_memory'] / 2**20:6.0f} MiB  "
              f"memory {json.dumps(r.get('memory', {}))} kv {r.get('type_k', '?')}/{r.get('type_v', '?')}")
        if r["test"] == "pp512": pp = 1000 * 512 / r["avg_ts"]
        if r["test"] == "tg128": tg = 1000 / r["avg_ts"]
lines = open("/tmp/ttft.txt").read().strip().splitlines()
for l in lines[:2]: print(l)
j = json.loads(lines[-1])
print("ttft list", " ".join(f"{x:.1f}" for x in j["ttft_ms"]))
print(f"N2: TTFT {j['ttft_median_ms']:.2f} ms vs pp512 {pp:.2f} ms ({100 * (j['ttft_median_ms'] / pp - 1):+.1f} %); gap {j['gap_mean_ms']:.3f} vs tg {tg:.3f} ms ({j['gap_mean_ms'] - tg:+.3f})")
clk = [int(x) for x in open("/tmp/clocks.txt").read().split() if x.isdigit()]
if clk:
    clk_s = sorted(clk)
    print(f"SM clock during the TTFT run: min {clk_s[0]} median {clk_s[len(clk_s) // 2]} max {clk_s[-1]} MHz over {len(clk)} samples; "
          f"share below 1500 MHz {100 * sum(c < 1500 for c in clk) / len(clk):.0f} %")
PY
cp lab/h200-prefix-cache.sh .devpack/ 2>/dev/null; timeout 200 .devpack/h200-prefix-cache.sh 2>&1 | tail -6
