#!/usr/bin/env bash
# The CPU transfer study (issue 44), declared in experiments/training/transfer.py before any of it ran:
#   teacher   the exploring teacher (scripted stand-in, execcritic/training/explorer.py) on the training pool and on
#             the held-out instances (its own rates), then a Gold audit of its bundles (B2G);
#   sft       SFT of SmolLM2-135M on the training pool's admitted trajectories;
#   base|sft-eval  one episode per held-out instance with the base model / the SFT checkpoint;
#   analyze   PYTHONPATH=. $PY experiments/training/transfer.py --analyze (the declared test, the table, the figure).
# Resumable: every step skips what is complete (evaluations resume per episode).
# Usage (repository root, `make venv` done): EXECCRITIC_VERIFIED=<verified_test.parquet> transfer.sh STEP...
set -euo pipefail
PY=${PY:-.venv/bin/python}
X="$PY -m execcritic.cli"
RUNS=runs/transfer
OUT=results/learning_curve/transfer
LABEL="CPU transfer study, SmolLM2-135M stand-in"
P=(-c cpu-transfer)
TEACHER=scripted:execcritic.training.explorer:exploring_test_teacher
SEED=$(PYTHONPATH=. $PY -c 'from experiments.training.transfer import EVAL_SEED as s; print(s)')
K=$(PYTHONPATH=. $PY -c 'from experiments.training.transfer import EPISODES as k; print(k)')
read -r NSFT ADMIT EPOCHS < <(PYTHONPATH=. $PY -c 'from experiments.training.transfer import MAX_SFT as n, SFT_ADMISSION as a, SFT_EPOCHS as e
print(n, a, e)')
export EXECCRITIC_RESULTS=${EXECCRITIC_RESULTS:-results} HF_HUB_OFFLINE=1 TRL_EXPERIMENTAL_SILENCE=1
mkdir -p "$RUNS" "$OUT/eval"
split() { for i in $(PYTHONPATH=. $PY experiments/training/transfer.py "$1"); do printf -- '--instance %s ' "$i"; done; }
step() { echo "== $(date -u +%H:%M:%S) $*  (load: $(cut -d' ' -f1-3 /proc/loadavg))"; }
timed() { local name=$1; shift; local t0; t0=$(date +%s); "$@"
  echo "{\"step\": \"$name\", \"wall_s\": $(( $(date +%s) - t0 )), \"ended\": \"$(date -u +%FT%TZ)\"}" >> "$OUT/timings.jsonl"; }

for s in "$@"; do case "$s" in
  teacher)
    for part in train heldout; do
      step "teacher on the $part instances"
      # shellcheck disable=SC2046
      timed "teacher-$part" $X generate-tests -d verified-sdist $(split $part) --out "$RUNS/teacher-$part" --workers 1 \
        --no-progress --test-source "$TEACHER" "${P[@]}" > /dev/null
      step "Gold audit of the teacher's $part bundles"
      # shellcheck disable=SC2046
      timed "teacher-audit-$part" $X audit -d verified-sdist $(split $part) --test-source "bundles:$RUNS/teacher-$part/generation.jsonl" \
        --out "$RUNS/teacher-audit-$part" --no-progress "${P[@]}" > /dev/null
      mkdir -p "$OUT/teacher"; cp "$RUNS/teacher-$part/generation.jsonl" "$OUT/teacher/$part.generation.jsonl"
      cp "$RUNS/teacher-audit-$part"/audit_*.jsonl "$OUT/teacher/$part.audit.jsonl"
    done ;;
  sft)
    step "SFT on at most $NSFT teacher trajectories (admission: $ADMIT, $EPOCHS epochs)"
    timed sft $X train sft --agent test --data "$RUNS/teacher-train/generation.jsonl" --model smollm2 --preset transfer \
      --run-id transfer-sft-test --teacher "$TEACHER" --label "$LABEL" "${P[@]}" --set "sft.trajectories=$NSFT" --set "sft.admission=$ADMIT" --set "sft.epochs=$EPOCHS" \
      $([ -d runs/train/transfer-sft-test ] && echo --resume) --json > "$RUNS/sft.json" ;;
  base-eval)
    step "base on the held-out instances ($K episode each, seed $SEED)"
    # shellcheck disable=SC2046
    timed eval-base $X train eval-episodes smollm2 --agent test $(split heldout) --episodes "$K" --seed "$SEED" \
      --out "$OUT/eval/test-base-heldout.jsonl" --label "$LABEL" "${P[@]}" --json > /dev/null ;;
  sft-eval)   # the two halves of the held-out list at once, one CPU each (an episode's seed depends on its instance
              # and k only, so the split changes no episode); a killed half resumes from its records
    pids=()
    for half in a b; do
      step "sft on held-out half $half ($K episode each, seed $SEED)"
      # shellcheck disable=SC2046
      timed "eval-sft-$half" $X train eval-episodes runs/train/transfer-sft-test/final --agent test $(split "heldout-$half") \
        --episodes "$K" --seed "$SEED" --out "$OUT/eval/test-sft-heldout-$half.jsonl" --label "$LABEL" "${P[@]}" \
        --json > /dev/null &
      pids+=($!)
    done
    failed=0; for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
    [ "$failed" = 0 ] || { echo "sft-eval: a half failed (its records are kept; run again to resume)" >&2; exit 1; } ;;
  analyze) PYTHONPATH=. $PY experiments/training/transfer.py --analyze ;;
  *) echo "usage: $0 teacher|sft|base-eval|sft-eval|analyze ..." >&2; exit 2 ;;
esac; done
