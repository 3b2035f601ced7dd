#!/usr/bin/env bash
# [N7] Continuous batching on the synth qwen2.5-3b Q4_K_M model: (1) `rocky bench -npl 1,2,4,8`
# (aggregate decode t/s of S sequences after a 512-token prompt each, llama-batched-bench style)
# against the issue's bars (4 streams ≥ 3× one stream's and ≥ 775 t/s = 2× llama.cpp's 387);
# (2) a --cont-batching server with 3 streams decoding while a 4,096-token prompt arrives: each
# stream's longest gap between tokens during the prefill against one prefill chunk (pp512 ms) plus
# one 4-sequence decode step. Usage on the device after pack.sh: bash lab/h200-batch.sh — prints a table.
set -u
R=".devpack/run rocky"; M=/tmp/q3b.gguf; O=${OUT:-/tmp/out}; mkdir -p "$O"
[[ -f $M ]] || timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
timeout 300 $R bench -m $M -p 512 -n 128 -npl 1,2,4,8 -ub 512 -r 3 --no-roofline -o json -q > /tmp/npl.json 2> /tmp/npl.err ||
  tail -5 /tmp/npl.err
cp /tmp/npl.json "$O/" 2>/dev/null
$R serve -m $M -ub 512 -c 8192 -np 4 --kv-unified --cont-batching --prefill-chunk 512 --port 8080 > /dev/null 2> /tmp/serve.err &
srv=$!
for i in $(seq 1 600); do curl -sf http://127.0.0.1:8080/health 2>/dev/null | grep -q '"ok"' && break; sleep 0.2; done
python3 - <<'PY' > /tmp/gap.json 2> /tmp/gap.err
# 3 streams of 600 tokens; 1.5 s in, a 4,096-token prompt (1 token generated). Token arrival times
# per stream; the longest gap of each stream while the long prompt was being prefilled.
import json, random, threading, time, urllib.request
URL = "http://127.0.0.1:8080/completion"
def post(body, on_line=None):
    req = urllib.request.Request(URL, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        if not body.get("stream"):
            return json.loads(r.read())
        for raw in r:
            line = raw.decode().strip()
            if line.startswith("data: "):
                on_line(json.loads(line[6:]))
times = [[] for _ in range(3)]
final = [None] * 3
def stream(i):
    def on(j):
        if j.get("stop"): final[i] = j
        elif j.get("content"): times[i].append(time.perf_counter())
    post({"prompt": f"Story {i}: once upon a time", "n_predict": 600, "temperature": 0, "ignore_eos": True,
          "cache_prompt": False, "stream": True}, on)
ts = [threading.Thread(target=stream, args=(i,)) for i in range(3)]
for t in ts: t.start()
time.sleep(1.5)
random.seed(1)
ids = [random.randint(100, 30000) for _ in range(4096)]
t0 = time.perf_counter()
long = post({"prompt": ids, "n_predict": 1, "temperature": 0, "cache_prompt": False})
t1 = time.perf_counter()
for t in ts: t.join()
gaps = []
for tt in times:
    g = [b - a for a, b in zip(tt, tt[1:]) if b > t0 and a < t1]
    gaps.append(1000 * max(g) if g else None)
steady = [1000 * (b - a) for tt in times for a, b in zip(tt, tt[1:]) if b < t0]
steady.sort()
print(json.dumps({"prefill_ms": 1000 * (t1 - t0), "long_timings": long.get("timings"), "max_gap_ms": gaps,
                  "steady_gap_median_ms": steady[len(steady) // 2] if steady else None,
                  "batch_seqs_max": [f["timings"]["batch_seqs_max"] if f else None for f in final]}))
PY
curl -s http://127.0.0.1:8080/metrics | grep -E '^rocky:batch' > /tmp/metrics.txt
kill -TERM $srv; wait $srv
cp /tmp/gap.json /tmp/metrics.txt "$O/" 2>/dev/null
python3 - <<'PY'
import json
rows = json.load(open("/tmp/npl.json"))
by = {r["test"]: r for r in rows}
pp = next((r for r in rows if r["test"] == "pp512"), None)
one = next((r["avg_ts"] for r in rows if r.get("n_pl") == 1), None)
print(f"{'test':22} {'t/s':>10} {'× one':>7}")
for r in rows:
    x = f"{r['avg_ts'] / one:.2f}" if one and r.get("n_pl") else "-"
    print(f"{r['test']:22} {r['avg_ts']:10.1f} {x:>7}")
four = next((r["avg_ts"] for r in rows if r.get("n_pl") == 4), None)
if four and one:
    print(f"N7 bar: 4 streams {four:.1f} t/s = {four / one:.2f}× one ({'ok' if four >= 3 * one else 'BELOW 3×'}), "
          f"{'ok' if four >= 775 else 'BELOW 775'} vs 775 t/s")
try:
    g = json.loads(open("/tmp/gap.json").read())
    chunk = 1000 * 512 / pp["avg_ts"] if pp else None
    step = 1000 * 4 / four if four else None
    bar = 2 * (chunk + step) if chunk and step else None
    print(f"4,096-token prefill took {g['prefill_ms']:.0f} ms while 3 streams decoded; longest gaps "
          f"{', '.join(f'{x:.1f}' if x else '?' for x in g['max_gap_ms'])} ms (steady median {g['steady_gap_median_ms']:.2f} ms); "
          f"bar 2 × (chunk {chunk:.1f} + step {step:.2f}) = {bar:.1f} ms: "
          f"{'ok' if bar and all(x and x <= bar for x in g['max_gap_ms']) else 'ABOVE'}; batch_seqs_max {g['batch_seqs_max']}")
except Exception as e:
    print("gap measurement failed:", e, open("/tmp/gap.err").read()[-800:])
print(open("/tmp/metrics.txt").read().strip())
PY
