#!/usr/bin/env bash
# The CPU learning-curve study (issue 21): SmolLM2-135M (a STAND-IN for the paper's Qwen3.5-35B-A3B) on real
# verified-sdist episodes with the real harness and official evaluator.
#   1. teacher trajectories from scripted stand-in teachers (execcritic/training/teachers.py: the Oracle-test and
#      Gold-patch teachers read what an agent never may; they are named as such everywhere) through the real
#      generation stage / Repair controller;
#   2. SFT of each agent at two data sizes (1 and 2 teacher trajectories);
#   3. GRPO from the larger SFT checkpoint on the same instances (DAPO, each agent's reward and masking rule);
#   4. every checkpoint (SFT n=2 and GRPO first, then base and SFT n=1) evaluated on the training instances (2 fresh
#      seeds each) and on held-out instances (1 episode each), with the training sampler (`eval-episodes`);
#   4b. (`checkpoints AGENT`, then `confirm AGENT [TEST]`) a checkpoint test declared in learning_curve.py
#      (CHECKPOINT_TESTS; default `confirm`): the pinned GRPO run's checkpoints remade into a scratch store, checked
#      equal to it, evaluated with fresh episodes on the test's instances (training or held-out);
#   5. the analysis: PYTHONPATH=. $PY experiments/training/learning_curve.py --study $STUDY (CIs, curves), then
#      `execcritic figures` (Figure 6b/6c draw the GRPO runs).
# Every protocol value is the cpu-curve profile (execcritic/profiles/cpu-curve.yaml; $PROFILE), recorded as
# deviations.
# Resumable: each step is skipped when its output is complete, and a killed SFT/GRPO run continues (--resume).
#
# Usage (repository root, `make venv` done):
#   EXECCRITIC_VERIFIED=<verified_test.parquet> experiments/training/learning_curve.sh [test|repair|all]
#   ... learning_curve.sh replicate test|repair SEED | checkpoints test|repair | confirm test|repair [TEST]
# Two chains (test, repair) can run at once in two shells; `all` runs both one after the other.
set -euo pipefail
PY=${PY:-.venv/bin/python}
X="$PY -m execcritic.cli"
AGENT=${1:-all}
STUDY=${STUDY:-cpu-curve}
RUNS=runs/$STUDY
OUT=results/learning_curve/$STUDY
EVAL=$OUT/eval
LABEL=${LABEL:-"CPU learning curve, SmolLM2-135M stand-in"}
PROFILE=${PROFILE:-cpu-curve}        # gpu-curve: the same recipe at a larger size (experiments/gpu_check.py)
P=(-c "$PROFILE")
TRAIN=(psf__requests-2931 psf__requests-5414)                              # SFT data order = these, first n
HELDOUT=(psf__requests-6028 sympy__sympy-24562 pytest-dev__pytest-7571)
REMAKE=${REMAKE:-runs/$STUDY-remake}         # scratch results store of `checkpoints` (not committed)
POOLS=results/candidates/$STUDY-test-pools   # committed with the study: the Test GRPO run reads them
# GRPO's sampling seed per agent. Repair uses 1: its per-instance rise was chosen after looking at the seed-0 run
# (learning_curve.py, INSTANCE_RISE_DECLARED_AT), so the committed run is a fresh seed on which it is declared ahead.
declare -A GRPO_SEED=([test]=${TEST_GRPO_SEED:-0} [repair]=${REPAIR_GRPO_SEED:-1})
# the study is committed: its SFT and GRPO runs go to the committed store (results/), not runs/results
export EXECCRITIC_RESULTS=${EXECCRITIC_RESULTS:-results} HF_HUB_OFFLINE=1 TRL_EXPERIMENTAL_SILENCE=1
mkdir -p "$RUNS" "$EVAL"

step() { echo "== $(date -u +%H:%M:%S) $*  (load: $(cut -d' ' -f1-3 /proc/loadavg))"; }
inst() { for i in "$@"; do printf -- '--instance %s ' "$i"; done; }
split_inst() { if [ "$1" = train ]; then inst "${TRAIN[@]}"; else inst "${HELDOUT[@]}"; fi; }   # a split's --instance args
timed() {   # timed NAME CMD...: wall seconds of each step in $OUT/timings.jsonl (committed with the study)
  local name=$1; shift; local t0; t0=$(date +%s)
  [ "$EXECCRITIC_RESULTS" = results ] || name=remake-$name   # `checkpoints`: not the study's own step
  "$@"
  echo "{\"step\": \"$name\", \"wall_s\": $(( $(date +%s) - t0 )), \"ended\": \"$(date -u +%FT%TZ)\"}" >> "$OUT/timings.jsonl"
}
done_run() { local m=$EXECCRITIC_RESULTS/$1/$2/manifest.json; [ -f "$m" ] && grep -q '"status": "complete"' "$m"; }
done_sft() { done_run sft "$1"; }
done_rl() { done_run training "$1"; }
resume() { [ -d "runs/train/$1" ] && echo --resume || true; }

evaluate() {   # evaluate AGENT NAME MODEL: training instances (2 fresh seeds each), held-out instances (1 each)
  local agent=$1 name=$2 model=$3 split ids n
  for split in train heldout; do
    ids=$(split_inst "$split"); if [ "$split" = train ]; then n=2; else n=1; fi
    [ -f "$EVAL/$agent-$name-$split.jsonl.summary.json" ] && continue
    step "eval $agent $name on $split instances"
    # shellcheck disable=SC2086
    timed "eval-$agent-$name-$split" $X train eval-episodes "$model" --agent "$agent" $ids --episodes $n --seed 1 \
      --out "$EVAL/$agent-$name-$split.jsonl" --label "$LABEL" "${P[@]}" --json > /dev/null
  done
}

grpo() {   # grpo AGENT SEED RUN_ID: GRPO from the SFT (n=2) checkpoint, its rollouts kept with the study
  local agent=$1 seed=$2 rl=$3
  local sft=runs/train/$STUDY-sft-$agent-n2/final
  if ! done_rl "$rl"; then
    # the committed SFT result does not bring its checkpoint (runs/ is not committed): say how to remake it
    [ -d "$sft" ] || { echo "no SFT checkpoint at $sft (its result is committed, its weights are not):" \
      "remove results/sft/$STUDY-sft-$agent-n2 and run again to remake it" >&2; exit 2; }
    step "$agent: GRPO from the SFT (n=2) checkpoint, sampling seed $seed"
    local extra=()
    [ "$agent" = test ] && extra=(--candidates "$POOLS")
    # shellcheck disable=SC2046
    timed "grpo-$agent${rl##*-rl-from-sft}" $X train "$agent-rl" -d verified-sdist $(inst "${TRAIN[@]}") "${extra[@]}" \
      --model "$sft" --init sft --preset "$STUDY" --run-id "$rl" --workers 2 \
      --seed "$seed" --official always --label "$LABEL" "${P[@]}" $(resume "$rl") --json > "$RUNS/$rl.json"
  fi
  if [ "$EXECCRITIC_RESULTS" = results ]; then   # a remake into a scratch store leaves the study's rollouts alone
    mkdir -p "$OUT/rollouts"
    gzip -nc "runs/train/$rl/rollouts.jsonl" > "$OUT/rollouts/$rl.jsonl.gz"
  fi
}

data_for() {   # data_for AGENT: environments and teacher trajectories (and, for Test, the candidate pools); sets DATA
  local agent=$1 data
  step "$agent: environments"
  # shellcheck disable=SC2046
  $X tasks build-sdist $(inst "${TRAIN[@]}" "${HELDOUT[@]}") > /dev/null
  if [ "$agent" = test ]; then
    data=$RUNS/teacher-test/generation.jsonl
    if [ ! -f "$data" ] || [ "$(wc -l < "$data")" -lt ${#TRAIN[@]} ]; then
      step "test: Oracle-test teacher (scripted stand-in) through the real generation stage"
      # shellcheck disable=SC2046
      timed teacher-test $X generate-tests -d verified-sdist $(inst "${TRAIN[@]}") --out "$RUNS/teacher-test" \
        --no-progress --test-source scripted:execcritic.training.teachers:oracle_test_teacher "${P[@]}" > /dev/null
    fi
    if [ ! -f "$POOLS/pools.json" ]; then
      step "test: labeled candidate pools (Gold + Gold mutants, each labeled by a real official run)"
      # shellcheck disable=SC2046
      timed pools $X candidates build -d verified-sdist $(inst "${TRAIN[@]}") --run-id "$STUDY-test-pools" \
        --root "$(dirname "$POOLS")" --workers 1 \
        --no-progress "${P[@]}" > /dev/null
    fi
  else
    data=$RUNS/teacher-repair/repair.jsonl
    if [ ! -f "$data" ] || [ "$(wc -l < "$data")" -lt ${#TRAIN[@]} ]; then
      step "repair: Gold-patch teacher (scripted stand-in) through the real Repair controller"
      # shellcheck disable=SC2046
      timed teacher-repair $X run -d verified-sdist $(inst "${TRAIN[@]}") --out "$RUNS/teacher-repair" --no-progress \
        --test-source oracle --repair-model scripted:execcritic.training.teachers:gold_patch_teacher --runs 1 \
        "${P[@]}" > /dev/null
    fi
  fi
  DATA=$data
}

sft() {   # sft AGENT N: SFT on the first N teacher trajectories (data_for first)
  local agent=$1 n=$2 id=$STUDY-sft-$1-n$2
  local teacher=scripted:execcritic.training.teachers:$([ "$agent" = test ] && echo oracle_test_teacher || echo gold_patch_teacher)
  if ! done_sft "$id"; then
    step "$agent: SFT on $n teacher trajectories"
    # shellcheck disable=SC2046
    timed "sft-$agent-n$n" $X train sft --agent "$agent" --data "$DATA" --model smollm2 --preset "$STUDY" \
      --run-id "$id" --teacher "$teacher" --label "$LABEL" "${P[@]}" --set sft.trajectories=$n $(resume "$id") \
      --json > "$RUNS/$id.json"
  fi
}

confirm() {   # confirm AGENT TEST: learning_curve.py's declared checkpoint test TEST (CHECKPOINT_TESTS) on the
              # checkpoints remade by `checkpoints`
  local agent=$1 test=$2 name model k seed split ids whose
  read -r whose k seed split < <(PYTHONPATH=. $PY -c 'import sys; from experiments.training.learning_curve import CHECKPOINT_TESTS as t
d = t[sys.argv[1]]; print(d["agent"], d["episodes"], d["seed"], d["split"])' "$test")
  [ "$whose" = "$agent" ] || { echo "checkpoint test $test is declared for the $whose agent, not $agent" >&2; exit 2; }
  PYTHONPATH=. $PY experiments/training/learning_curve.py --study "$STUDY" --check-remake "$REMAKE" --agent "$agent"
  ids=$(split_inst "$split")
  # the two checkpoints at once, one CPU each (an evaluation uses one torch thread); a killed one resumes from its
  # records, and either one failing fails the step
  local pids=()
  for name in sft-n2 grpo; do
    model=runs/train/$STUDY-$([ "$name" = grpo ] && echo "$agent-rl-from-sft" || echo "sft-$agent-n2")/final
    [ -f "$EVAL/$agent-$name-$split-$test.jsonl.summary.json" ] && continue
    step "$test: $agent $name on the $split instances, $k fresh episodes each (seed $seed)"
    # shellcheck disable=SC2086
    timed "$test-$agent-$name" $X train eval-episodes "$model" --agent "$agent" $ids \
      --episodes "$k" --seed "$seed" --out "$EVAL/$agent-$name-$split-$test.jsonl" --label "$LABEL" "${P[@]}" --json > /dev/null &
    pids+=($!)
  done
  local pid failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  [ "$failed" = 0 ] || { echo "$test: an evaluation failed (its records are kept; run again to resume)" >&2; exit 1; }
}

chain() {   # chain AGENT: teacher data, SFT x 2, GRPO, evaluations
  local agent=$1
  data_for "$agent"
  sft "$agent" 1
  sft "$agent" 2
  grpo "$agent" "${GRPO_SEED[$agent]}" "$STUDY-$agent-rl-from-sft"
  # GRPO's before/after first, then the SFT data sizes against the base model
  evaluate "$agent" sft-n2 "runs/train/$STUDY-sft-$agent-n2/final"
  evaluate "$agent" grpo "runs/train/$STUDY-$agent-rl-from-sft/final"
  evaluate "$agent" base smollm2
  evaluate "$agent" sft-n1 "runs/train/$STUDY-sft-$agent-n1/final"
  step "$agent: done"
}

case "$AGENT" in
  test|repair) chain "$AGENT" ;;
  all) chain test; chain repair ;;
  # the declared checkpoint tests (learning_curve.py CHECKPOINT_TESTS): the SFT (n=2) and GRPO checkpoints remade from
  # the committed recipe into a scratch store (weights are not committed), then evaluated with fresh episodes
  checkpoints) [ "${2:-}" = test ] || [ "${2:-}" = repair ] || { echo "usage: $0 checkpoints test|repair" >&2; exit 2; }
    EXECCRITIC_RESULTS=$REMAKE; data_for "$2"; sft "$2" 2; grpo "$2" "${GRPO_SEED[$2]}" "$STUDY-$2-rl-from-sft" ;;
  confirm) [ "${2:-}" = test ] || [ "${2:-}" = repair ] || { echo "usage: $0 confirm test|repair [TEST]" >&2; exit 2; }
    confirm "$2" "${3:-confirm}" ;;
  # a replication: the same GRPO recipe from the same SFT checkpoint on another sampling seed (no evaluations);
  # learning_curve.py reports its rise beside the pinned run's (REPLICATION_DECLARED_AT there: declared ahead or not)
  replicate) [ "${2:-}" = test ] || [ "${2:-}" = repair ] && [ -n "${3:-}" ] || { echo "usage: $0 replicate test|repair SEED" >&2; exit 2; }
    grpo "$2" "$3" "$STUDY-$2-rl-from-sft-seed$3" ;;
  *) echo "usage: $0 [test|repair|all] | replicate test|repair SEED | checkpoints test|repair | confirm test|repair [TEST]" >&2; exit 2 ;;
esac
