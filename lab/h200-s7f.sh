#!/usr/bin/env bash
# Session 7, call 7: the defaults after #36 (attention_decode up to 16 tokens, the profile's
# attn_split tile for split keys): pp16 / pp50 @ d5000, pp512 / tg128, then [N3]'s prefix-cache lab.
# Usage on the device: bash lab/h200-s7f.sh
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=".devpack/run rocky"; M=/tmp/q3b.gguf
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
ln -sf $M /tmp/qwen2.5-3b-q4_k_m.gguf
show() { python3 -c "import json,sys; [print(f\"{r['test']}: {r['avg_ts']:.1f} ± {r.get('stddev_ts',0):.1f} t/s\") for r in json.load(open(sys.argv[1]))]" "$1"; }
timeout 60 $R bench -m $M -p 16,50 -n 0 -d 5000 -ub 512 -r 2 --no-roofline -o json > "$O/short.json" 2> "$O/short.err" && show "$O/short.json"
timeout 60 $R bench -m $M -p 512 -n 128 -ub 512 -r 2 --no-roofline -o json > "$O/base.json" 2> "$O/base.err" && show "$O/base.json"
cp lab/h200-prefix-cache.sh .devpack/ && OUT=$O timeout 120 .devpack/h200-prefix-cache.sh > "$O/prefix.txt" 2>&1; tail -6 "$O/prefix.txt"
