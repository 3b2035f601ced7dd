#!/usr/bin/env bash
# Session 3's last device call: [N7] lab/h200-batch.sh (bench -npl and the prefill-while-streaming
# gap; its bench also gives pp512 / tg128 of the merged main), [N8] lab/h200-tune.sh STAGE=quick,
# [N9] lab/h200-qwen35.sh — each bounded by timeout so the call fits the device budget.
# Usage on the device after pack.sh: bash lab/h200-final3.sh
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O/batch" "$O/tune" "$O/qwen35"
cp lab/h200-tune.sh lab/h200-qwen35.sh .devpack/
echo "=== [N7] batch"; OUT="$O/batch" timeout 170 bash lab/h200-batch.sh 2>&1 | tail -20
echo "=== [N8] tune --quick"; OUT="$O/tune" STAGE=quick REPS=3 timeout 190 bash .devpack/h200-tune.sh 2>&1 | tail -12
echo "=== [N9] qwen35"; rm -f /tmp/q3b.gguf; OUT="$O/qwen35" REPS=2 timeout 150 bash .devpack/h200-qwen35.sh 2>&1 | tail -16
