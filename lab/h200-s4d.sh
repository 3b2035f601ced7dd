#!/usr/bin/env bash
# Session 4: flash attention with split keys ([N3]/[N5]) on the H200 — a short ubatch at depth
# (pp50 / pp16 @ d5000, the agent's next message) split vs unsplit (ROCKY_ATTN_SPLIT=0), then [N3]'s
# prefix-cache figures (lab/h200-prefix-cache.sh: cold / warm / RAM tier / restart from disk).
# Usage on the device: bash lab/h200-s4d.sh
set -u
R="$PWD/.devpack/run rocky"; O=${OUT:-/tmp/out}; mkdir -p "$O"; M=/tmp/q3b.gguf
[[ -f $M ]] || timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1
export XDG_CACHE_HOME=/tmp/none
timeout 60 $R bench -m $M -ub 512 --no-roofline -o json -q -p 512 -n 0 -r 3 > /dev/null 2>&1  # clocks up
for sp in "" 0; do
  ROCKY_ATTN_SPLIT=$sp timeout 120 $R bench -m $M -ub 512 --no-roofline -o json -q -p 16,50 -n 0 -d 5000 -r 5 > /tmp/sp$sp.json 2> /tmp/sp.err || tail -3 /tmp/sp.err
  python3 -c "
import json; r=json.load(open('/tmp/sp$sp.json'))
for x in r: print('split' if '$sp'=='' else 'unsplit', x['test'], round(x['avg_ts'],1), '±', round(x['stddev_ts'],1), 't/s', round(1000*int(x['test'].split()[0][2:])/x['avg_ts'],2), 'ms')"
done
cp lab/h200-prefix-cache.sh .devpack/ && bash .devpack/h200-prefix-cache.sh 2>&1 | tail -7
