R=".devpack/run rocky"; M=/tmp/q3b.gguf
[[ -f $M ]] || timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1
port=8100
for flags in "-c 4096" "-c 4096 --cache-ram 0"; do
 for ncp in "" "--no-cache-prompt"; do
  port=$((port+1))
  $R serve -m $M -ub 512 --port $port $flags > /dev/null 2> /tmp/serve-$port.err &
  srv=$!
  for i in $(seq 1 600); do curl -sf http://127.0.0.1:$port/health 2>/dev/null | grep -q '"ok"' && break; sleep 0.2; done
  echo "serve $flags $ncp:"
  python3 lab/ttft.py --url http://127.0.0.1:$port --prompt-tokens 512 --runs 10 --gen 128 $ncp 2>&1 | python3 -c '
import json,sys
lines=sys.stdin.read().strip().splitlines()
for l in lines[:2]: print("  ", l)
j=json.loads(lines[-1]); print("   ttft", " ".join(f"{x:.1f}" for x in j["ttft_ms"])); print("   srv ", " ".join(f"{x:.1f}" for x in j["server_prompt_ms"]))'
  kill -TERM $srv; wait $srv
 done
done
