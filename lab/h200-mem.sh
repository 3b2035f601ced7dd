#!/usr/bin/env bash
# [N4] weights once + f16 KV: peak device memory and pp512 / tg128 of the 3B synth (ub 512) on the
# H200, by nvidia-smi (sampled every 100 ms) and by rocky's own report (bench -o json: memory by
# kind, peak_device_memory), the idle figure of a rocky process holding the model (rocky serve
# before any request), and the f32-KV run for comparison. Usage on the device:
# .devpack/lab/h200-mem.sh (prints a table last). PRESET=qwen2.5-7b for the 7B.
set -u
D=$(cd "$(dirname "$0")/.." && pwd)
R="$D/run rocky"
O=${OUT:-/tmp/out}; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
timeout 200 $R synth --preset ${PRESET:-qwen2.5-3b} --type q4_k_m -q -o /tmp/m.gguf > /dev/null 2>&1 || echo synth failed
$R roofline --reps 3 --json > "$O/roofline.json" 2> "$O/roofline.err"
smi() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$O/smi_$1.txt" 2>/dev/null & echo $!; }
for kv in f16 f32; do
  s=$(smi $kv)
  timeout 240 $R bench -m /tmp/m.gguf -p 512 -n 128 -ub 512 -r ${REPS:-3} -ctk $kv -ctv $kv \
    --roofline-json "$O/roofline.json" -o json -q > "$O/bench_$kv.json" 2> "$O/bench_$kv.err"
  kill $s 2>/dev/null
done
# Idle: a server with the model loaded (weights + one slot's KV + its first arena), no request.
timeout 60 $R serve -m /tmp/m.gguf --port 0 -c 4096 > "$O/serve.out" 2> "$O/serve.err" &
srv=$!
for i in $(seq 1 40); do grep -q "listening" "$O/serve.err" 2>/dev/null && break; sleep 0.5; done
sleep 1
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1 > "$O/smi_idle.txt"
kill $srv 2>/dev/null; wait $srv 2>/dev/null
python3 - "$O" "$base" <<'PY'
import json, sys, os
o, base = sys.argv[1], int(sys.argv[2])
r = json.load(open(os.path.join(o, "roofline.json")))
print(f"roofline copy {r['copy_gbs']:.0f} GB/s; nvidia-smi before rocky {base} MiB")
for kv in ("f16", "f32"):
    try:
        smi = [int(x) for x in open(os.path.join(o, f"smi_{kv}.txt")).read().split() if x.isdigit()]
        print(f"-ctk/-ctv {kv}: nvidia-smi peak {max(smi)} MiB ({max(smi) - base} MiB over the idle GPU)")
    except Exception as e: print("smi", kv, e)
    for row in json.load(open(os.path.join(o, f"bench_{kv}.json"))):
        m = row.get("memory", {})
        print(f"  {row['test']:8} {row['avg_ts']:10.1f} ± {row['stddev_ts']:.1f} t/s  peak {row['peak_device_memory']/2**20:.0f} MiB"
              f"  weights {m.get('weights',0)/2**20:.0f} kv {m.get('kv',0)/2**20:.0f} arena {m.get('arena',0)/2**20:.0f}"
              f" other {m.get('other',0)/2**20:.0f} MiB; model {row['model_size']/2**20:.0f} MiB"
              f" (weights {m.get('weights',0)/max(1,row['model_size']):.3f}x)  {row.get('gbs',0):.0f} GB/s")
try: print(f"idle rocky serve (-c 4096): nvidia-smi {open(os.path.join(o, 'smi_idle.txt')).read().strip()} MiB")
except Exception as e: print("idle", e)
PY
