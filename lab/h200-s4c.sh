#!/usr/bin/env bash
# Session 4, one device call: [N6] pp512/tg128 and prefill TFLOP/s of qwen2.5-3b, qwen3-4b,
# llama-3.2-3b and gemma-3-4b with the built-in nvidia profile (+ qwen3-4b's per-op profile);
# [N8] `rocky tune --quick --start-profile generic` against the earlier hand-made nvidia tiles
# (given as a ROCKY_TUNE file) and the built-in (full-tune) ones, same call; [N5] flash-attention
# tiles at pp4096. Usage on the device: bash lab/h200-s4c.sh
set -u
R="$PWD/.devpack/run rocky"; O=${OUT:-/tmp/out}; mkdir -p "$O"; W=/tmp/s4c; mkdir -p $W
export XDG_CACHE_HOME=$W/none
B="-ub 512 --no-roofline -o json -q"
M=/tmp/q3b.gguf
[[ -f $M ]] || timeout 200 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1
cat > $W/hand.json <<'J'
{"mmq": {"bm": 128, "bn": 128, "bk": 64, "wm": 64, "wn": 64, "tm": 8, "tn": 8, "prefetch": 1, "vec4": 0},
 "mmq_alt": [{"bm": 64, "bn": 128, "bk": 64, "wm": 32, "wn": 64, "tm": 4, "tn": 8, "prefetch": 1, "vec4": 0},
             {"bm": 32, "bn": 64, "bk": 64, "wm": 32, "wn": 32, "tm": 4, "tn": 4, "prefetch": 1, "vec4": 0}],
 "min_workgroups": 120, "mm": {"bm": 128, "bn": 64, "bk": 32, "wm": 64, "wn": 32, "tm": 8, "tn": 4},
 "attn": [{"wg": 128, "br": 16, "tr": 1, "tc": 2, "prefetch": 1}, {"wg": 128, "br": 32, "tr": 2, "tc": 4, "prefetch": 1},
          {"wg": 64, "br": 8, "tr": 1, "tc": 1, "prefetch": 0}]}
J
timeout 90 $R bench -m $M $B -p 512 -n 128 -r 3 > $O/m_qwen2.5-3b.json 2> $W/e || tail -3 $W/e
ROCKY_TUNE=$W/hand.json timeout 90 $R bench -m $M $B -p 512 -n 0 -r 5 > $O/hand.json 2> $W/e || tail -3 $W/e
XDG_CACHE_HOME=$W/quick timeout 200 $R tune --quick --start-profile generic -m $M > /dev/null 2> $W/tq.err || tail -3 $W/tq.err
grep -E "^tune: .*s$|mul_mmq over" $W/tq.err | tail -2
XDG_CACHE_HOME=$W/quick timeout 90 $R bench -m $M $B -p 512 -n 0 -r 5 > $O/quick.json 2> $W/e || tail -3 $W/e
timeout 90 $R bench -m $M $B -p 512 -n 0 -r 5 > $O/builtin.json 2> $W/e || tail -3 $W/e
for t in "128 16 4 2 1" "256 8 1 1 0" "128 8 1 1 0" "128 32 4 2 1" "128 16 4 1 1" "128 16 2 2 1"; do
  set -- $t
  echo "{\"attn\": [{\"wg\": $1, \"br\": $2, \"tr\": $3, \"tc\": $4, \"prefetch\": $5}]}" > $W/a.json
  ROCKY_TUNE=$W/a.json timeout 60 $R bench -m $M $B -p 4096 -n 0 -r 1 > $W/a.out 2> $W/e || tail -2 $W/e
  python3 -c "import json,sys; r=json.load(open('$W/a.out')); print('attn wg$1 br$2 tr$3 tc$4 pf$5  pp4096', round(r[0]['avg_ts'],1))" 2>/dev/null
done
for m in qwen3-4b llama-3.2-3b gemma-3-4b; do
  timeout 200 $R synth --preset $m --type q4_k_m -q -o /tmp/n6.gguf > /dev/null 2>&1 || echo "synth $m failed"
  timeout 120 $R bench -m /tmp/n6.gguf $B -p 512 -n 128 -r 3 > $O/m_$m.json 2> $W/e || tail -3 $W/e
  [[ $m == qwen3-4b ]] && timeout 60 $R bench -m /tmp/n6.gguf $B -p 512 -n 0 -r 1 --profile > $O/prof_q3.json 2> $W/e
  rm -f /tmp/n6.gguf
done
python3 - "$O" <<'PY'
import json, sys, os
o = sys.argv[1]
def rows(f):
    try: return json.load(open(os.path.join(o, f)))
    except Exception as e: print(f, "failed", e); return []
for f in ("hand.json", "quick.json", "builtin.json"):
    for x in rows(f): print(f"{f[:-5]:10} {x['test']:6} {x['avg_ts']:9.1f} ± {x['stddev_ts']:5.1f} t/s  {x.get('tflops', 0):.2f} TFLOP/s")
base = None
for m in ("qwen2.5-3b", "qwen3-4b", "llama-3.2-3b", "gemma-3-4b"):
    for x in rows(f"m_{m}.json"):
        tf = x.get('tflops', 0)
        if x['test'] == 'pp512' and m == 'qwen2.5-3b': base = tf
        rel = f"{100 * tf / base:5.1f} %" if base and x['test'] == 'pp512' else ""
        print(f"{m:13} {x['test']:6} {x['avg_ts']:9.1f} ± {x['stddev_ts']:5.1f} t/s  {tf:6.2f} TFLOP/s {rel}  peak {x.get('peak_device_memory', 0) / 2**20:.0f} MiB")
for row in rows("prof_q3.json"):
    tot = sum(p['ms'] for p in row['profile']); print(f"-- qwen3-4b {row['test']} total {tot:.3f} ms")
    for p in sorted(row['profile'], key=lambda p: -p['ms'])[:10]: print(f"   {p['op']:30} {p['ms']:8.3f} ms {p['dispatches']:4d} disp")
PY
