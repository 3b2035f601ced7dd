#!/usr/bin/env bash
# [N7] bench -npl only (one short device call): aggregate decode of 1 / 2 / 4 / 8 sequences on the
# synth qwen2.5-3b Q4_K_M, with the multi-column matvec (default) and with ROCKY_MMV_COLS=1 (mul_mmq).
set -u
R=".devpack/run rocky"; M=/tmp/q3b.gguf
timeout 100 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
timeout 90 $R bench -m $M -p 512 -n 64 -npl 1,2,4,8 -ub 512 -r 2 --no-roofline 2>/dev/null | grep -E "\| (pp|tg)" | head -8
