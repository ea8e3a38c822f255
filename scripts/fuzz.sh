#!/usr/bin/env bash
# Runs every libFuzzer harness of a fuzz build (make fuzz) for FUZZ_SECONDS
# each, one after the other, and prints per harness the executions, the
# coverage libFuzzer reached (cov: edges, ft: features) and the corpus size.
#
#   scripts/fuzz.sh BUILD_DIR [harness ...]
#
# Seeds come from tests/fuzz/corpus/<harness>/ (read only); what the run
# adds goes to BUILD_DIR/corpus/<harness>/, crashes to
# BUILD_DIR/crashes/<harness>-*, each harness's output to
# BUILD_DIR/fuzz-<harness>.log. Exits 1 if any harness crashed, with the
# reproducer's path: `BUILD_DIR/<harness> <file>` runs it again; once fixed,
# copy it into tests/fuzz/corpus/<harness>/ as a regression input.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/fuzz.sh BUILD_DIR [harness ...]}
shift
secs=${FUZZ_SECONDS:-60}
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in "$build"/fuzz_*; do
    [ -x "$f" ] && names+=("$(basename "$f")")
  done
fi
if [ ${#names[@]} -eq 0 ]; then
  echo "fuzz.sh: no harness in $build (build the 'fuzzers' target)" >&2
  exit 2
fi

# UBSan reports are fatal (make fuzz builds with -fno-sanitize-recover);
# symbolized stacks; the suppressions say why each entry is there.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:symbolize=1:suppressions=$PWD/tests/sanitizers/asan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$PWD/tests/sanitizers/ubsan.supp}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/sanitizers/lsan.supp}

mkdir -p "$build/crashes"
failed=0
printf '%-18s %8s %12s %10s %8s %8s %10s  %s\n' harness seconds executions exec/s cov ft corpus result
for name in "${names[@]}"; do
  seeds=tests/fuzz/corpus/$name
  work=$build/corpus/$name
  log=$build/fuzz-$name.log
  mkdir -p "$work" "$seeds"
  start=$(date +%s)
  "$build/$name" -max_total_time="$secs" -timeout=30 -rss_limit_mb=3072 \
    -print_final_stats=1 -artifact_prefix="$build/crashes/$name-" \
    "$work" "$seeds" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
  result=ok
  if [ $rc -ne 0 ]; then
    failed=1
    art=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    result="CRASH (status $rc) ${art:-see $log}"
  fi
  printf '%-18s %8s %12s %10s %8s %8s %10s  %s\n' "$name" "$took" "${execs:-?}" "${rate:-?}" \
    "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result"
  if [ $rc -ne 0 ]; then
    grep -E 'ERROR|SUMMARY|runtime error|fuzz_[a-z_]*:' "$log" | head -5 | sed 's/^/    /'
  fi
done
exit $failed
