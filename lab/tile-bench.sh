# Sourced by lab/h200-s8*.sh … s11*.sh: the synth model and b NAME [ENV=VALUE …], which runs pp4096 and
# pp512 @ d8192 (`-r 2`, JSON in $O/NAME.json and $O/NAME-d.json) and appends both names to $names;
# t NAME [ENV=VALUE …]: the same at `-r 1`, after the flash pipelines' statistics (ROCKY_PIPELINE_STATS)
# of a 1,024-token prefill, appended to $O/pstats.txt; main_rows: main's figures at its defaults (pp512 /
# tg128 and -npl 1,4 at -r 2, the --profile of pp4096 and of pp512 @ d8192, the roofline), then the tables
# of every b / t run and of both profiles.
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=".devpack/run rocky"; M=/tmp/q3b.gguf
[ -s $M ] || timeout 150 $R synth --preset qwen2.5-3b --type q4_k_m -q -o $M > /dev/null 2>&1 || echo synth failed
names=()
b() {
  local name=$1; shift; names+=("$name" "$name-d")
  timeout 60 env "$@" $R bench -m $M -p 4096 -n 0 -ub 512 -r 2 --no-roofline -o json > "$O/$name.json" 2> "$O/$name.err" || echo "$name failed: $(tail -2 "$O/$name.err")"
  timeout 60 env "$@" $R bench -m $M -p 512 -n 0 -d 8192 -ub 512 -r 2 --no-roofline -o json > "$O/$name-d.json" 2> "$O/$name-d.err" || echo "$name-d failed: $(tail -2 "$O/$name-d.err")"
}
t() {
  local name=$1; shift; names+=("$name" "$name-d")
  echo "tile $name" >> "$O/pstats.txt"
  ROCKY_PIPELINE_STATS=attention_flash timeout 60 env "$@" $R bench -m $M -p 1024 -n 0 -ub 512 -r 1 --no-roofline -o json 2>&1 > /dev/null | grep -a "^pipeline\|rocky: error" | cut -c1-300 >> "$O/pstats.txt"
  timeout 60 env "$@" $R bench -m $M -p 4096 -n 0 -ub 512 -r 1 --no-roofline -o json > "$O/$name.json" 2> "$O/$name.err" || echo "$name failed: $(tail -2 "$O/$name.err")"
  timeout 60 env "$@" $R bench -m $M -p 512 -n 0 -d 8192 -ub 512 -r 1 --no-roofline -o json > "$O/$name-d.json" 2> "$O/$name-d.err" || echo "$name-d failed: $(tail -2 "$O/$name-d.err")"
}
main_rows() {
  timeout 90 $R bench -m $M -p 512 -n 128 -ub 512 -r 2 --no-roofline -o json > "$O/base.json" 2> "$O/base.err"
  timeout 120 $R bench -m $M -p 512 -n 64 -npl 1,4 -ub 512 -r 2 --no-roofline -o json > "$O/npl.json" 2> "$O/npl.err"
  timeout 90 $R bench -m $M -p 4096 -n 0 -ub 512 -r 1 --no-roofline --profile -o json > "$O/prof4096.json" 2> "$O/prof4096.err"
  timeout 90 $R bench -m $M -p 512 -n 0 -d 8192 -ub 512 -r 1 --no-roofline --profile -o json > "$O/profd.json" 2> "$O/profd.err"
  timeout 60 $R roofline --reps 3 2>&1 | tail -6
  python3 lab/bench_table.py "$O" "${names[@]}" base npl
  python3 lab/bench_table.py "$O" --prof prof4096 profd | cut -c1-500
}
