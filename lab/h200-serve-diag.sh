#!/usr/bin/env bash
# [N2] where a server request's time goes, against bench: the same model through `rocky bench`,
# `rocky run` (the Generator without HTTP) at -c 640 and -c 4096, and `rocky serve` with and
# without the prefix cache's RAM tier (lab/ttft.py). Usage on the device after pack.sh:
# bash lab/h200-serve-diag.sh
set -u
R=".devpack/run rocky"; M=/tmp/q3b.gguf
[[ -f $M ]] || timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
$R bench -m $M -p 512 -n 128 -ub 512 -r 2 --no-roofline -o json -q 2>/dev/null | python3 -c '
import json,sys
for r in json.load(sys.stdin): print(f"bench {r[\"test\"]:6} {r[\"avg_ts\"]:9.1f} t/s = {1000*(r[\"n_prompt\"] or r[\"n_gen\"])/r[\"avg_ts\"]:7.2f} ms")'
python3 -c 'print(("Once upon a time there was a little girl named Lily. She liked to play in the park with her friends. " * 30))' > /tmp/p.txt
for c in 640 4096; do
  for rep in 1 2; do
    $R run -m $M -f /tmp/p.txt -n 128 --temp 0 --ignore-eos -c $c -ub 512 --json 2>/dev/null | python3 -c '
import json,sys; j=json.load(sys.stdin); t=j["timings"]
print(f"run -c '$c': prompt {t["n_prompt"]} tok {t["prompt_ms"]:.2f} ms ({t["prompt_tps"]:.0f} t/s); gen {t["gen_ms"]/max(1,t["n_gen"]):.3f} ms/token")'
  done
done
port=8090
for flags in "-c 4096" "-c 4096 --cache-ram 0" "-c 640 --cache-ram 0"; do
  port=$((port+1))
  $R serve -m $M -ub 512 --port $port $flags > /dev/null 2> /tmp/serve-$port.err &
  srv=$!
  for i in $(seq 1 600); do curl -sf http://127.0.0.1:$port/health 2>/dev/null | grep -q '"ok"' && break; sleep 0.2; done
  echo "serve $flags:"
  python3 lab/ttft.py --url http://127.0.0.1:$port --prompt-tokens 512 --runs 10 --gen 128 2>&1 | python3 -c '
import json,sys
lines=sys.stdin.read().strip().splitlines()
for l in lines[:2]: print("  ", l)
j=json.loads(lines[-1]); print("   ttft list", " ".join(f"{x:.1f}" for x in j["ttft_ms"]))'
  kill -TERM $srv; wait $srv
done
