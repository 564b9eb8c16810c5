"""verl 0.9.1: our agent loops and estimators in verl's registries, the launch files (Tables 7-8) against verl's own
config tree, each agent's masking rule through verl's `compute_advantage`, and one CPU data path on a local Ray
cluster: real Repair and Test episodes of a `verified-sdist` task (sympy__sympy-24443) run by verl's own `AgentLoopWorker`
(a Ray actor), sampled through verl's `LLMServerClient` and load balancer from a CPU token server actor, batched
into verl's `DataProto`, then scored by our estimator.

The random tiny model cannot write an action, so a scripted *token* plan (`rl_fixtures.ServerScript`, named as
such) constrains which tokens the server samples on the planned turns; episodes, sandboxes, harness, official
evaluator, rewards, masks and advantages are the real ones."""

from __future__ import annotations

import math
import os
import statistics
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("verl", reason="the verl extra is not installed (make venv installs it)")

import torch

from execcritic.config import PAPER, load_protocol
from execcritic.errors import InputError
from execcritic.rewards import (
    TestRollout,
    advantages_for_repair_agent,
    advantages_for_test_agent,
    group_test_rewards,
)
from execcritic.training import verl_config as vc

REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------------
# registration and launch files
# --------------------------------------------------------------------------------------------------

def test_agent_loops_and_estimators_are_in_verls_registries():
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, _agent_loop_registry
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.utils.import_utils import load_class_from_fqn

    import execcritic.training.verl_adapter as va

    for role, name in vc.AGENT_LOOP_NAMES.items():
        cls = load_class_from_fqn(_agent_loop_registry[name]["_target_"])
        assert issubclass(cls, AgentLoopBase) and cls.role == role
    assert get_adv_estimator_fn("execcritic_test_grpo") is va.test_agent_advantages
    assert get_adv_estimator_fn("execcritic_repair_grpo") is va.repair_agent_advantages
    # the agent-loop file verl's workers load names the same classes
    entries = yaml.safe_load(vc.AGENT_LOOPS_FILE.read_text())
    assert {e["name"]: e["_target_"] for e in entries} == {n: _agent_loop_registry[n]["_target_"]
                                                           for n in vc.AGENT_LOOP_NAMES.values()}
    assert (REPO / vc.AGENT_LOOPS_RELPATH).resolve() == vc.AGENT_LOOPS_FILE.resolve()
    pytest.importorskip("transfer_queue", reason="verl's v1 replay buffer needs TransferQueue (the verl extra)")
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
    from verl.utils.import_utils import load_extern_type

    sampler = load_extern_type(f"pkg://{vc.SAMPLER_MODULE}", vc.SAMPLER_CLASS)
    assert issubclass(sampler, ReplayBuffer)


def test_committed_launch_files_equal_the_derivation_and_mirror_tables_7_8():
    for role in vc.ROLES:
        assert vc.config_file(role).read_text() == vc.render_yaml(role), \
            f"{vc.config_file(role)} is stale: python -m execcritic.training.verl_config --write"
    assert vc.AGENT_LOOPS_FILE.read_text() == vc.agent_loops_yaml()
    test, repair = (vc.load_verl_yaml(vc.config_file(r)) for r in vc.ROLES)
    for cfg, rl, ctx in ((test, PAPER.test_rl, 48_000), (repair, PAPER.repair_rl, 65_536)):
        actor, rollout = cfg["actor_rollout_ref"]["actor"], cfg["actor_rollout_ref"]["rollout"]
        assert (actor["clip_ratio_low"], actor["clip_ratio_high"], actor["kl_loss_coef"]) == (0.2, 0.28, 0.0)
        assert actor["optim"]["lr"] == 1e-6 and actor["optim"]["betas"] == [0.9, 0.98]
        assert actor["optim"]["weight_decay"] == 0.1 and not actor["use_kl_loss"]
        m = actor["megatron"]
        assert (m["tensor_model_parallel_size"], m["context_parallel_size"], m["expert_model_parallel_size"]) == (2, 4, 4)
        assert cfg["data"]["train_batch_size"] == 16 and rollout["n"] == 8 and rollout["name"] == "sglang"
        assert rollout["prompt_length"] + rollout["response_length"] == ctx == rollout["max_model_len"]
        # the split is ours, a named deviation every verl manifest records (verl_launch.train_verl)
        assert rollout["prompt_length"] == vc.ENGINE_DEVIATIONS["verl.rollout.prompt_length"]["used"]
        assert cfg["trainer"]["total_training_steps"] == rl.steps
        assert actor["ppo_mini_batch_size"] * 8 == rl.global_batch_size
        assert cfg["algorithm"]["norm_adv_by_std_in_grpo"] is False
        assert cfg["trainer"]["v1"]["sampler"]["custom_sampler"]["name"] == "ExecCriticReplayBuffer"
    assert test["actor_rollout_ref"]["actor"]["optim"]["lr_decay_style"] == "constant"
    assert repair["actor_rollout_ref"]["actor"]["optim"]["lr_decay_style"] == "cosine"
    assert repair["actor_rollout_ref"]["actor"]["loss_agg_mode"] == "token-mean"      # per-token loss
    # Table 8c: 2 GPUs per SGLang engine with DP-attention 2 = verl's tensor 1 x data 2, expert 2
    r = repair["actor_rollout_ref"]["rollout"]
    assert (r["tensor_model_parallel_size"], r["data_parallel_size"], r["expert_parallel_size"]) == (1, 2, 2)
    assert r["engine_kwargs"]["sglang"]["enable_dp_attention"] is True


def test_launch_files_compose_with_verls_hydra_config_and_pass_its_dataclasses():
    """What `python -m verl.trainer.main_ppo --config-path ... --config-name test_rl` composes: verl's own config
    groups (not the flattened reference) plus ours, then verl's dataclass checks of each section."""
    from hydra import compose, initialize_config_dir
    from verl.utils.config import omega_conf_to_dataclass

    for role in vc.ROLES:
        with initialize_config_dir(config_dir=str(vc.CONFIG_DIR), version_base=None):
            cfg = compose(config_name=vc.config_file(role).stem, overrides=["actor_rollout_ref.model.path=/unused"])
        assert cfg.algorithm.adv_estimator == vc.ADV_ESTIMATOR_NAMES[role]
        assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == vc.AGENT_LOOP_NAMES[role]
        assert list(cfg.actor_rollout_ref.actor.optim.betas) == [0.9, 0.98]
        for section in (cfg.algorithm, cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.actor.optim,
                        cfg.actor_rollout_ref.rollout):
            omega_conf_to_dataclass(section)


def test_launch_file_validation_names_the_file_and_the_key(tmp_path):
    good = yaml.safe_load(vc.config_file("repair").read_text())

    def write(doc, name="bad.yaml") -> Path:
        p = tmp_path / name
        p.write_text(yaml.safe_dump(doc))
        return p

    assert vc.load_verl_yaml(write(good, "good.yaml"))["algorithm"]["adv_estimator"] == "execcritic_repair_grpo"
    cases = [
        (("actor_rollout_ref", "actor", "clip_ratio_hgh"), 0.28, "actor_rollout_ref.actor.clip_ratio_hgh"),
        (("trainer", "v1", "sampler", "custom_sampler", "module"), "x", "trainer.v1.sampler.custom_sampler.module"),
        (("actor_rollout_ref", "rollout", "name"), "hf", "actor_rollout_ref.rollout.name"),
        (("actor_rollout_ref", "actor", "loss_agg_mode"), "per-token", "actor_rollout_ref.actor.loss_agg_mode"),
        (("algorithm", "adv_estimator"), "grpo_opmask", "algorithm.adv_estimator"),
        (("algorithm", "rollout_correction", "rollout_rs"), "token_k1", "algorithm.rollout_correction.rollout_rs"),
    ]
    for path, value, key in cases:
        doc = yaml.safe_load(yaml.safe_dump(good))
        node = doc
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
        bad = write(doc)
        with pytest.raises(InputError) as err:
            vc.load_verl_yaml(bad)
        assert err.value.file == str(bad) and err.value.field == key, (key, str(err.value))
        assert str(bad) in str(err.value) and key in str(err.value)
    # sampler_kwargs is one of verl's free-form mappings: any key below it is the sampler's own
    doc = yaml.safe_load(yaml.safe_dump(good))
    doc["trainer"]["v1"]["sampler"]["sampler_kwargs"]["anything"] = 1
    vc.load_verl_yaml(write(doc, "free.yaml"))
    (tmp_path / "broken.yaml").write_text("algorithm: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML") as err:
        vc.load_verl_yaml(tmp_path / "broken.yaml")
    assert err.value.file == str(tmp_path / "broken.yaml")
    # protocol values verl cannot express are refused at generation, naming the knob
    for values, key in (({"grpo.max_groups_offered": 8}, "grpo.max_groups_offered"),
                        ({"repair_rl.lr_horizon_steps": 50}, "repair_rl.lr_horizon_steps"),
                        ({"repair_rl.loss_reduction": "per-batch"}, "repair_rl.loss_reduction"),
                        ({"repair_rl.global_batch_size": 12}, "repair_rl.global_batch_size")):
        with pytest.raises(InputError) as err:
            vc.verl_config("repair", load_protocol(values=values))
        assert err.value.field == key


# --------------------------------------------------------------------------------------------------
# estimators and the DAPO filter, through verl's own compute_advantage
# --------------------------------------------------------------------------------------------------

def _batch(rewards, masks):
    """A verl batch: reward on the last response token, the given response masks, one group."""
    from verl.protocol import DataProto

    width = max(len(m) for m in masks)
    mask = torch.tensor([m + [0] * (width - len(m)) for m in masks], dtype=torch.int64)
    scores = torch.zeros(len(masks), width)
    for i, (r, m) in enumerate(zip(rewards, masks)):
        scores[i, len(m) - 1] = r
    data = DataProto.from_dict(tensors={"token_level_rewards": scores, "response_mask": mask})
    data.non_tensor_batch["uid"] = np.array(["g"] * len(masks), dtype=object)
    return data


def _advantages(name, rewards, masks):
    from verl.trainer.ppo.ray_trainer import compute_advantage

    data = compute_advantage(_batch(rewards, masks), adv_estimator=name, norm_adv_by_std_in_grpo=False, config=None)
    out = data.batch["advantages"]
    assert float(out[data.batch["response_mask"] == 0].abs().sum()) == 0.0    # tool/feedback/padding: no advantage
    first = [m.index(1) if 1 in m else 0 for m in masks]
    return [float(out[i, j]) for i, j in enumerate(first)], out


def _turns(n, masked=False):
    """A response mask with n model turns (each a run of 1s, separated by tool-output tokens), or masked."""
    mask = []
    for _ in range(n):
        mask += [1, 1, 1, 0, 0]
    return [0] * len(mask) if masked else mask


def test_estimators_apply_each_agents_masking_rule_through_verl_compute_advantage(monkeypatch):
    monkeypatch.delenv(vc.PROTOCOL_ENV, raising=False)
    import execcritic.training.verl_adapter as va

    # Test agent: Eq. 5 levels 1.0 (3 turns), 1.0 (14 turns: > 8 more than the shortest -> halved), -0.2, and a
    # masked rollout with level 1.0 that must be out of the mean
    rollouts = [TestRollout(True, True, True, tp=1, tn=1, turns=3), TestRollout(True, True, True, tp=1, tn=1, turns=14),
                TestRollout(False, turns=2), TestRollout(True, True, True, tp=1, tn=1, operational_errors=1, turns=3)]
    ours = group_test_rewards(rollouts)
    expected = advantages_for_test_agent(ours).advantages
    masks = [_turns(3), _turns(14), _turns(2), _turns(3, masked=True)]
    got, full = _advantages("execcritic_test_grpo", [b.level_reward for b in ours], masks)
    assert got == pytest.approx(list(expected)) and ours[1].turn_penalized
    assert float(full[3].abs().sum()) == 0.0                                  # masked: exactly 0 everywhere
    assert got[0] == pytest.approx(1.0 - statistics.fmean([1.0, 0.5, -0.2]))  # masked 1.0 not in the mean

    # Repair agent: the masked rollout's raw reward IS in the mean, then its advantage is 0
    class B:
        def __init__(self, reward, masked):
            self.reward, self.masked = reward, masked

    raw, masked = [1.5, 0.1, 0.2, 0.0], [False, False, True, False]
    masks = [_turns(2, masked=m) for m in masked]
    got, full = _advantages("execcritic_repair_grpo", raw, masks)
    assert got == pytest.approx(list(advantages_for_repair_agent([B(r, m) for r, m in zip(raw, masked)]).advantages))
    assert got[0] == pytest.approx(1.5 - statistics.fmean(raw)) and got[2] == 0.0
    assert float(full[2].abs().sum()) == 0.0

    # the estimator refuses std normalization the protocol does not have
    from verl.trainer.config import AlgoConfig

    with pytest.raises(InputError, match="norm_adv_by_std_in_grpo"):
        va.repair_agent_advantages(_batch(raw, masks).batch["token_level_rewards"], _batch(raw, masks).batch["response_mask"],
                                   np.array(["g"] * 4), config=AlgoConfig(norm_adv_by_std_in_grpo=True))


def test_a_turn_run_mismatch_masks_and_is_counted():
    """The estimator reads turns from runs of model tokens; a rollout whose count differs is masked (never trained
    on a wrong turn count) - and counted and flagged, so valid rollouts are not dropped silently."""
    import execcritic.training.verl_adapter as va
    from execcritic.training.episodes import EpisodeResult
    from execcritic.training.policy import TrajectorySample

    before = va.TURN_MISMATCHES["repair"]
    good = TrajectorySample([1, 2], [3, 4, 5, 6], [-1.0] * 4, [1, 0, 1, 1], 2)
    bad = TrajectorySample([1, 2], [3, 4, 5, 6], [-1.0] * 4, [1, 1, 1, 1], 2)   # 2 turns, one run of model tokens
    outs = {name: va.loop_output(EpisodeResult(s, 0.1, False, None, {}, "repair", object()), s, seconds=0.0)
            for name, s in (("good", good), ("bad", bad))}
    assert sum(outs["good"].response_mask) == 3 and sum(outs["bad"].response_mask) == 0
    infos = {k: o.extra_fields["reward_extra_info"] for k, o in outs.items()}
    assert infos["good"][va.TURN_MISMATCH_KEY] == 0.0 and infos["bad"][va.TURN_MISMATCH_KEY] == 1.0
    assert infos["bad"][va.MASKED_KEY] == 1.0 and va.TURN_MISMATCHES["repair"] == before + 1


def test_dapo_keeps_groups_whose_unmasked_rewards_vary():
    import execcritic.training.verl_adapter as va

    def info(r, m=False, t=3):
        return {va.REWARD_KEY: r, va.MASKED_KEY: float(m), va.TURNS_KEY: float(t)}

    groups = {
        "varies": [info(1.0), info(0.0)],
        "only_masked_differs": [info(0.0), info(0.0), info(1.0, True)],   # verl's own filter would keep this
        "slack_makes_it_vary": [info(1.0, t=3), info(1.0, t=20)],         # Eq. 5's turn slack: 1.0 vs 0.5
        "all_masked": [info(1.0, True), info(0.0, True)],
        "one_live": [info(1.0), info(0.0, True)],
    }
    drops = va.group_drops("test", groups)
    assert {k: v.value for k, v in drops.items()} == {"only_masked_differs": "all_equal_rewards",
                                                      "all_masked": "all_masked", "one_live": "too_few_unmasked"}
    with pytest.raises(InputError, match="execcritic_turns"):
        va.group_drops("test", {"g": [{va.REWARD_KEY: 1.0, va.MASKED_KEY: 0.0}]})


def test_dataset_rows_round_trip_through_verls_rlhfdataset(sympy_task, tiny_model_dir, tmp_path):
    """Rows written by `write_verl_dataset` come out of verl's RLHFDataset + collate as the kwargs our loops
    rebuild the episode row from (task reloaded, labeled pool inline); a malformed candidate names its field."""
    from transformers import AutoTokenizer
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    import execcritic.training.verl_adapter as va
    from execcritic.harness.gate import LabeledPatch
    from execcritic.training.episodes import test_row

    pool = [LabeledPatch(sympy_task.patch, True, "gold"), LabeledPatch("diff --git a/x b/x\n", False, "mutant:x")]
    path = va.write_verl_dataset([va.verl_record("test", test_row(sympy_task, pool), "verified-sdist")],
                                 tmp_path / "test_train.parquet")
    cfg = vc.composed_config("test", overrides={"actor_rollout_ref.model.path": str(tiny_model_dir)})
    item = RLHFDataset([path], AutoTokenizer.from_pretrained(str(tiny_model_dir)), cfg.data)[0]
    batch = DataProto.from_single_dict(collate_fn([item])).repeat(repeat_times=2, interleave=True)
    kwargs = {k: v[1] for k, v in batch.non_tensor_batch.items()}
    assert kwargs["agent_name"] == "execcritic_test" and kwargs["raw_prompt"] == test_row(sympy_task, pool)["prompt"]
    row = va.row_from_record("test", kwargs["extra_info"], PAPER)
    assert row["task"].instance_id == sympy_task.instance_id and row["task"].patch == sympy_task.patch
    assert list(row["candidates"]) == pool
    bad = {**kwargs["extra_info"], "candidates": [{"patch": "x", "resolved": "yes"}]}
    with pytest.raises(InputError) as err:
        va.row_from_record("test", bad, PAPER)
    assert err.value.field == "extra_info.candidates[0]"
    with pytest.raises(InputError, match="one role per dataset file"):
        va.write_verl_dataset([va.verl_record("test", row, "verified-sdist"),
                               va.verl_record("repair", {**row, "feedback_node": "n"}, "verified-sdist")],
                              tmp_path / "mixed.parquet")


# --------------------------------------------------------------------------------------------------
# one CPU data path on a local Ray cluster
# --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def local_ray():
    """One local Ray cluster for this module's Ray tests (2 cores; logical CPUs so that TransferQueue's and verl's
    actors can be placed, all declared num_cpus=0 or 1). Workers import this checkout (PYTHONPATH)."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():   # a session another test left behind would not carry this module's runtime env
        ray.shutdown()
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           **{k: os.environ[k] for k in ("EXECCRITIC_VERIFIED", "PYTHONDONTWRITEBYTECODE") if k in os.environ}}
    # address="local": always a new cluster (never one another process started, nor a stale /tmp/ray record of one)
    ray.init(address="local", num_cpus=8, include_dashboard=False, log_to_driver=True, runtime_env={"env_vars": env})
    try:
        yield ray
    finally:
        ray.shutdown()


def _object_array(values):
    arr = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        arr[i] = v
    return arr


def _agent_loop_rollouts(ray, role, make_row, scripted, updates, tiny_model_dir, tmp_path, monkeypatch, n=3):
    """`n` rollouts of one group of `role` through verl's own AgentLoopWorker (a Ray actor), sampled through
    verl's LLMServerClient and load balancer from a CPU token server actor: (batch, served, protocol, cfg, wall).
    `make_row(protocol)`: the episode row; `updates`: {protocol section: {knob: value}} over the cpu-train profile."""
    import time

    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
    from verl.workers.rollout.llm_server import LLMServerClient
    from verl.workers.rollout.router import GlobalRequestLoadBalancer

    import execcritic.training.verl_adapter as va
    from tests.training.rl_fixtures import ServerScript

    profile = yaml.safe_load((REPO / "execcritic/profiles/cpu-train.yaml").read_text())
    for section, values in updates.items():
        profile.setdefault(section, {}).update(values)
    proto_file = tmp_path / "protocol.yaml"
    proto_file.write_text(yaml.safe_dump(profile))
    protocol = load_protocol(str(proto_file))
    monkeypatch.setenv(vc.PROTOCOL_ENV, str(proto_file))
    cfg = vc.composed_config(role, protocol, overrides={
        "actor_rollout_ref.model.path": str(tiny_model_dir),
        "actor_rollout_ref.rollout.name": "vllm",           # names the client's server flavour; no vLLM runs here
        "actor_rollout_ref.rollout.prompt_length": 4096, "actor_rollout_ref.rollout.response_length": 4096,
        "actor_rollout_ref.rollout.agent.num_workers": 1,
        # per-episode request ids reach the server only in verl's deterministic mode (the scripted plans need them)
        "actor_rollout_ref.rollout.full_determinism": True,
        "actor_rollout_ref.rollout.agent.agent_loop_config_path": str(vc.AGENT_LOOPS_FILE),
        "data.max_prompt_length": 4096, "data.max_response_length": 4096})
    started = time.monotonic()
    # the worker process reads the protocol the way every process of a verl run does ($EXECCRITIC_PROTOCOL)
    worker_env = {"env_vars": {**ray.get_runtime_context().runtime_env.get("env_vars", {}),
                               vc.PROTOCOL_ENV: str(proto_file)}}
    server = ray.remote(va.CPUTokenServer).options(num_cpus=0).remote(str(tiny_model_dir),
                                                                       processor_factory=ServerScript(scripted))
    balancer = ray.remote(GlobalRequestLoadBalancer).options(num_cpus=0).remote({"cpu-token-server-0": server})
    worker = ray.remote(AgentLoopWorker).options(num_cpus=0, runtime_env=worker_env).remote(
        cfg, LLMServerClient(cfg, balancer))
    try:
        # the dataset path verl's trainer takes: our parquet rows -> verl's RLHFDataset -> collate -> n rollouts
        path = va.write_verl_dataset([va.verl_record(role, make_row(protocol), "verified-sdist")],
                                     tmp_path / f"{role}_train.parquet")
        dataset = RLHFDataset([path], scripted.tok, cfg.data)
        batch = DataProto.from_single_dict(collate_fn([dataset[0]])).repeat(repeat_times=n, interleave=True)
        batch.non_tensor_batch["uid"] = _object_array(["group-0"] * n)
        batch.non_tensor_batch["priority"] = np.arange(n, dtype=np.int64)   # as verl's AgentLoopManager adds it
        batch.meta_info.update({"global_steps": 0, "validate": False})
        out = ray.get(worker.generate_sequences.remote(batch), timeout=900)
        served = ray.get(server.served.remote())
    finally:
        for actor in (worker, balancer, server):
            ray.kill(actor)
    return out, served, protocol, cfg, time.monotonic() - started


def _trained_and_untrained_text(tok, batch, i):
    """The decoded response tokens of rollout `i` that carry loss, and those that do not (within its length)."""
    resp, m = batch["responses"][i], batch["response_mask"][i].bool()
    length = int(batch["attention_mask"][i, 4096:].sum())
    return tok.decode(resp[m].tolist()), tok.decode(resp[:length][~m[:length]].tolist())


@pytest.mark.integration
@pytest.mark.slow
def test_real_repair_episodes_through_verls_agent_loop_worker_on_local_ray(local_ray, tiny_model_dir, sympy_task,
                                                                            tmp_path, monkeypatch):
    from transformers import AutoTokenizer
    from verl.trainer.ppo.ray_trainer import compute_advantage

    import execcritic.training.verl_adapter as va
    from execcritic.training.episodes import repair_row
    from tests.training.rl_fixtures import EXPORT, SUBMIT_FIX, ScriptedTokenPolicy, heredoc

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    target = "sympy/combinatorics/homomorphisms.py"
    gold = heredoc("/tmp/gold.patch", sympy_task.patch, "EOF_GOLD") + f"\ncd /testbed && git apply /tmp/gold.patch && {EXPORT}"
    wrong = f"cd /testbed && printf '\\n# looked at it\\n' >> {target} && {EXPORT}"
    broken = f"cd /testbed && printf '\\ndef broken(:\\n' >> {target} && {EXPORT}"
    scripted = ScriptedTokenPolicy(tok, [
        ("round0_fix", [gold, SUBMIT_FIX]),            # passes the Oracle F2P node at Round 0: 1.5
        ("wrong", [wrong, SUBMIT_FIX, "ls"]),          # usable, the selected test fails: 0.1
        ("broken", [broken, SUBMIT_FIX, "ls"]),        # the terminal test cannot run: masked
    ])
    n = 3
    out, served, protocol, cfg, wall = _agent_loop_rollouts(
        local_ray, "repair", lambda protocol: repair_row(sympy_task, protocol), scripted,
        {"repair": {"round0_turns": 2, "revision_rounds": 1, "turns_per_round": 1},
         "repair_rl": {"max_response_tokens": scripted.max_turn_tokens, "global_batch_size": 3},
         "grpo": {"rollouts_per_group": 3, "groups_per_step": 1, "max_groups_offered": 2}},
        tiny_model_dir, tmp_path, monkeypatch, n=n)

    # verl's batch format: padded prompts/responses, masks, rollout logprobs, the reward on the last token
    b, nt = out.batch, out.non_tensor_batch
    assert b["prompts"].shape == (n, 4096) and b["responses"].shape == (n, 4096)
    assert b["input_ids"].shape == (n, 8192) and b["rollout_log_probs"].shape == (n, 4096)
    records = list(nt["execcritic"])
    plans = [r["info"]["server"]["scripted_plan"] for r in records]
    assert sorted(plans) == ["broken", "round0_fix", "wrong"], records
    at = {p: i for i, p in enumerate(plans)}
    fix, wrong_, broken_ = (records[at[p]] for p in ("round0_fix", "wrong", "broken"))
    assert fix["info"]["final_reason"] == "round0_pass" and fix["reward"] == 1.5 and not fix["masked"]
    assert fix["info"]["official"]["resolved"] is True                      # a fresh official evaluation
    assert wrong_["reward"] == pytest.approx(0.1) and not wrong_["masked"] and wrong_["turns"] == 3
    assert broken_["masked"] and broken_["breakdown"]["mask_reason"].startswith("terminal_test_invalid")
    rm = b["rm_scores"].sum(-1).tolist()
    assert [rm[at[p]] for p in ("round0_fix", "wrong")] == pytest.approx([1.5, 0.1])
    assert list(nt[va.MASKED_KEY]) == [float(r["masked"]) for r in records]

    # masks: a masked rollout trains nothing; model tokens 1, tool output and harness feedback 0
    mask = b["response_mask"]
    assert int(mask[at["broken"]].sum()) == 0
    for i in (at["round0_fix"], at["wrong"]):
        m = mask[i].bool()
        trained, untrained = _trained_and_untrained_text(tok, b, i)
        assert "<function=bash>" in trained and "<tool_response>" not in trained and "<tool_response>" in untrained
        assert "<returncode>" in untrained and "<returncode>" not in trained
        lp = b["rollout_log_probs"][i][m]
        assert int(m.sum()) == records[i]["model_tokens"] and bool((lp <= 0).all()) and bool(lp.ne(0).any())
        assert va.response_turns(m.tolist()) == records[i]["turns"]
    w = at["wrong"]
    length = int(b["attention_mask"][w, 4096:].sum())
    assert "<failing_test_output>" in tok.decode(b["responses"][w][:length][~mask[w][:length].bool()].tolist())

    # verl's compute_advantage with our estimator: the Repair rule over the group
    out.batch["token_level_rewards"] = out.batch["rm_scores"]
    scored = compute_advantage(out, adv_estimator="execcritic_repair_grpo", norm_adv_by_std_in_grpo=False,
                               config=cfg.algorithm)
    adv = scored.batch["advantages"]
    raw = [r["reward"] for r in records]
    mean = statistics.fmean(raw)
    assert mean != pytest.approx(statistics.fmean([fix["reward"], wrong_["reward"]]))   # the two rules differ here
    for p in ("round0_fix", "wrong"):
        i = at[p]
        live = adv[i][mask[i].bool()]
        assert torch.allclose(live, torch.full_like(live, raw[i] - mean)) and float(adv[i][~mask[i].bool()].abs().sum()) == 0
    assert float(adv[at["broken"]].abs().sum()) == 0.0
    # and DAPO keeps this group (its unmasked rewards differ)
    infos = [{k: float(nt[k][i]) for k in (va.REWARD_KEY, va.MASKED_KEY, va.TURNS_KEY)} for i in range(n)]
    assert va.group_drops("repair", {"group-0": infos}, protocol) == {}
    # one sticky request id per episode, every turn answered by the server (2 + 3 + 3 planned turns)
    assert served == {"turns": sum(r["turns"] for r in records), "requests": n} and served["turns"] == 8
    assert math.isfinite(wall)
    print(f"\n[verl-ray] 3 real Repair episodes through AgentLoopWorker in {wall:.1f} s ({served['turns']} server turns)")



@pytest.mark.integration
@pytest.mark.slow
def test_real_test_agent_episodes_through_verls_agent_loop_worker_on_local_ray(local_ray, tiny_model_dir, sympy_task,
                                                                               candidate_run, tmp_path, monkeypatch):
    """The Learn-to-Test loop on the same Ray path: real Test episodes (Base gate, Gold audit, the labeled pool's
    candidates), Eq. 5 from the harness, and the Test rule through verl's compute_advantage (the masked rollout
    is out of the group mean)."""
    from transformers import AutoTokenizer
    from verl.trainer.ppo.ray_trainer import compute_advantage

    import execcritic.training.verl_adapter as va
    from execcritic.training.candidates import load_pools, require_pool
    from execcritic.training.episodes import test_row
    from tests.training.rl_fixtures import PRIVATE, PUBLIC, SUBMIT_TEST, ScriptedTokenPolicy, write_bundle

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    scripted = ScriptedTokenPolicy(tok, [
        ("public", [write_bundle(PUBLIC), SUBMIT_TEST]),     # qualifies; discriminates the pool: 1.0
        ("private", [write_bundle(PRIVATE), SUBMIT_TEST]),   # a correct refactoring breaks its import: masked
        ("none", ["ls", "cat README.md | head -3"]),         # never submits: -0.2
    ])

    def make_row(protocol):
        pool = require_pool(load_pools(candidate_run.run_dir), sympy_task.instance_id, protocol.test_rl, source="pool")
        # Gold's run on a bundle is the Gold audit's own: leave it out of the pool to save two executions
        return test_row(sympy_task, [c for c in pool if c.source != "gold"], protocol)

    n = 3
    out, served, protocol, cfg, wall = _agent_loop_rollouts(
        local_ray, "test", make_row, scripted,
        {"test_agent": {"max_turns": 2, "max_output_tokens": scripted.max_turn_tokens},
         "test_rl": {"global_batch_size": 3},
         "grpo": {"rollouts_per_group": 3, "groups_per_step": 1, "max_groups_offered": 2}},
        tiny_model_dir, tmp_path, monkeypatch, n=n)

    b, nt = out.batch, out.non_tensor_batch
    records = list(nt["execcritic"])
    at = {r["info"]["server"]["scripted_plan"]: i for i, r in enumerate(records)}
    assert sorted(at) == ["none", "private", "public"], records
    public, private, none = (records[at[p]] for p in ("public", "private", "none"))
    assert public["reward"] == 1.0 and not public["masked"] and public["info"]["qualified"]
    assert private["masked"] and "candidate_operational_error" in private["breakdown"]["mask_reason"]
    assert none["reward"] == pytest.approx(-0.2) and not none["masked"]
    rm = b["rm_scores"].sum(-1).tolist()
    assert [rm[at["public"]], rm[at["none"]]] == pytest.approx([1.0, -0.2])
    assert list(nt[va.MASKED_KEY]) == [float(r["masked"]) for r in records]

    mask = b["response_mask"]
    assert int(mask[at["private"]].sum()) == 0                              # a masked rollout trains nothing
    trained, untrained = _trained_and_untrained_text(tok, b, at["public"])
    assert "<function=bash>" in trained and "EOF_PATCH" in trained and "<tool_response>" not in trained
    assert "<tool_response>" in untrained and "TEST-PATCH SUBMISSION QUALIFIED" not in trained
    assert int(mask[at["public"]].sum()) == public["model_tokens"]

    # verl's compute_advantage with our estimator: the Test rule (the masked rollout is out of the mean)
    out.batch["token_level_rewards"] = out.batch["rm_scores"]
    scored = compute_advantage(out, adv_estimator="execcritic_test_grpo", norm_adv_by_std_in_grpo=False,
                               config=cfg.algorithm)
    adv = scored.batch["advantages"]
    mean = statistics.fmean([public["reward"], none["reward"]])
    for p, r in (("public", public), ("none", none)):
        i = at[p]
        live = adv[i][mask[i].bool()]
        assert torch.allclose(live, torch.full_like(live, r["reward"] - mean))
    assert float(adv[at["private"]].abs().sum()) == 0.0
    infos = [{k: float(nt[k][i]) for k in (va.REWARD_KEY, va.MASKED_KEY, va.TURNS_KEY)} for i in range(n)]
    assert va.group_drops("test", {"group-0": infos}, protocol) == {}
    assert served["requests"] == n and served["turns"] == sum(r["turns"] for r in records)
    print(f"\n[verl-ray] 3 real Test episodes through AgentLoopWorker in {wall:.1f} s ({served['turns']} server turns)")

@pytest.mark.integration
@pytest.mark.slow
def test_replay_buffer_evicts_and_refills_by_the_papers_rule_on_a_live_transferqueue(local_ray, monkeypatch):
    """`ExecCriticReplayBuffer.sample` (verl's sync replay buffer with our classification) on a real TransferQueue:
    trajectories are stored exactly as verl's TQ agent loop stores them (`AgentLoopOutput.as_dict`, keys
    `{uid}_{session}_{index}`, a finished prompt tag); the generator behind `refill_fn` is scripted (named as such:
    it stores finished groups at once instead of running episodes)."""
    tq = pytest.importorskip("transfer_queue")
    from omegaconf import OmegaConf

    from execcritic.training.verl_sampler import ExecCriticReplayBuffer

    monkeypatch.delenv(vc.PROTOCOL_ENV, raising=False)

    def put_group(uid, specs):
        _put_group(uid, [r for r, _ in specs], masked=[i for i, (_, m) in enumerate(specs) if m])

    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    try:
        put_group("keep", [(1.5, False), (0.1, False), (0.0, True)])
        put_group("maskonly", [(0.1, False), (0.1, False), (1.5, True)])   # verl's own filter would keep it
        refills: list[int] = []

        def refill(k: int) -> None:   # scripted generator: k new finished groups whose rewards vary
            refills.append(k)
            for j in range(k):
                put_group(f"new{len(refills)}x{j}", [(1.0, False), (0.1, False), (0.2, False)])

        buffer = ExecCriticReplayBuffer("sync", OmegaConf.create({}), 8, "drop",
                                        OmegaConf.create({"role": "repair", "train_batch_size": 2}), refill_fn=refill)
        buffer.poll_interval = 0.2
        meta, metrics = buffer.sample(global_steps=0, partition_id="train", batch_size=2)
    finally:
        tq.close()
    groups = {k.split("_")[0] for k in meta.keys}
    # 3 sampleable groups for 2 slots (verl picks among equally old ones in no set order): 1 surplus discarded
    assert "maskonly" not in groups and groups < {"keep", "new1x0", "new1x1"} and len(meta.keys) == 6
    assert metrics["training/filter_groups/evicted_samples"] == 1
    assert metrics["training/filter_groups/discarded_surplus_samples"] == 1
    assert metrics["_dapo_filtered_reward_counts"] == {"all_equal_rewards": 1}
    assert refills == [2]                                   # verl's sync rule: 2 refills per evicted group


def test_the_turn_slack_counts_the_last_turn_of_a_truncated_response(monkeypatch):
    """verl's estimator counts turns from `response_mask` (runs of 1s). A response cut at the response budget ends
    inside its last model turn (no envelope after it) and is right-padded with zeros in verl's batch; that last
    turn must still count, so Eq. 5's turn slack sees the episode's count: 11 turns against a 2-turn rollout of the
    same level is more than 8 longer (halved), 10 turns is not."""
    va = pytest.importorskip("execcritic.training.verl_adapter")
    from execcritic.training.episodes import EpisodeResult
    from execcritic.training.policy import TrajectorySample

    monkeypatch.delenv(vc.PROTOCOL_ENV, raising=False)

    def sample(turns, truncated):
        mask = []
        for t in range(turns):      # 2 model tokens, then a 2-token envelope - except after a truncated last turn
            mask += [1, 1] + ([] if truncated and t == turns - 1 else [0, 0])
        return TrajectorySample([1, 2, 3], list(range(10, 10 + len(mask))), [-0.5] * len(mask), mask, turns)

    samples = [sample(2, False), sample(11, True), sample(10, True)]
    infos = []
    for smp in samples:
        out = va.loop_output(EpisodeResult(smp, 1.0, False, None, {}, "test", object()), smp, seconds=0.0)
        infos.append(out.extra_fields["reward_extra_info"])
        assert out.response_mask[-1] == 1 or smp.turns == 2          # the truncated ones end inside a model turn
    assert [i[va.TURNS_KEY] for i in infos] == [2.0, 11.0, 10.0] and not any(i[va.TURN_MISMATCH_KEY] for i in infos)
    width = 64                                                        # verl's padded response_length
    mask = torch.zeros(3, width, dtype=torch.int64)
    rewards = torch.zeros(3, width)
    for row, smp in enumerate(samples):
        mask[row, :len(smp.env_mask)] = torch.tensor(smp.env_mask)
        rewards[row, len(smp.env_mask) - 1] = 1.0
    assert va.batch_facts(rewards, mask)[2] == [2, 11, 10]
    adv, _ = va.test_agent_advantages(rewards, mask, index=np.array(["g"] * 3, dtype=object))
    final = [1.0, 0.5, 1.0]                                           # only the 11-turn rollout is halved
    mean = sum(final) / 3
    for row in range(3):
        assert torch.allclose(adv[row][mask[row].bool()], torch.full((int(mask[row].sum()),), final[row] - mean))
    assert va.group_scores("test", {"g": infos})["g"][0] == pytest.approx(final)   # DAPO sees the same counts


def test_verl_refuses_an_aborted_baseline_its_estimator_cannot_compute(tmp_path, monkeypatch):
    """verl's estimator sees an aborted and a masked Repair rollout alike (all-zero response_mask), so
    `grpo.aborted_baseline='exclude'` is refused by the launch config and by the estimator, never silently run as
    'invalid_level'; the Test role is unaffected (its aborted rollouts are out of the mean by its own rule)."""
    proto = load_protocol(values={"grpo.aborted_baseline": "exclude"})
    with pytest.raises(InputError, match="aborted_baseline"):
        vc.verl_config("repair", proto)
    assert vc.verl_config("test", proto)["algorithm"]["adv_estimator"] == vc.ADV_ESTIMATOR_NAMES["test"]
    va = pytest.importorskip("execcritic.training.verl_adapter")
    path = tmp_path / "protocol.yaml"
    path.write_text(yaml.safe_dump(proto.to_dict()))
    monkeypatch.setenv(vc.PROTOCOL_ENV, str(path))
    with pytest.raises(InputError, match="aborted_baseline"):
        va.repair_agent_advantages(torch.zeros(2, 3), torch.ones(2, 3), index=np.array(["u", "u"], dtype=object))


@pytest.mark.integration
def test_replay_buffer_skips_a_capped_step_like_the_trl_path_on_a_live_transferqueue(local_ray, monkeypatch):
    """With `max_groups_offered` groups offered and too few kept, the sync buffer no longer stops the run: the step
    ends as the TRL runner's does (`rewards.end_step`: the latest dropped groups fill the empty slots and train
    nothing, the stop reason is `offer_cap`), so the next step - and a resumed run, which replays the step - goes
    on. The generators behind `refill_fn` are scripted (they store finished groups at once)."""
    tq = pytest.importorskip("transfer_queue")
    from omegaconf import OmegaConf

    from execcritic.rewards import REWARD_OVER
    from execcritic.training.verl_sampler import ExecCriticReplayBuffer

    monkeypatch.delenv(vc.PROTOCOL_ENV, raising=False)

    put_group = _put_group

    def buffer(cap, refill, size=1):
        b = ExecCriticReplayBuffer("sync", OmegaConf.create({}), 8, "drop",
                                   OmegaConf.create({"role": "repair", "train_batch_size": size,
                                                     "max_groups_offered": cap}), refill_fn=refill)
        b.poll_interval = 0.2
        return b

    def stats(metrics):
        return {k.rsplit("/", 1)[1]: v for k, v in metrics.items() if k.startswith("training/execcritic/")}

    def stored(keys, field):
        data = tq.kv_batch_get(keys=sorted(keys), partition_id="train", select_fields=[field])
        return [t.tolist() for t in data[field].unbind(0)]

    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    try:
        # no group kept: the dropped group fills the step with its rewards zeroed (masks kept: verl's actor divides
        # by the trainable tokens), so every advantage is 0
        put_group("flat", [0.1, 0.1, 0.1])
        refills: list[int] = []
        meta, metrics = buffer(1, refills.append).sample(global_steps=1, partition_id="train", batch_size=1)
        assert refills == []                     # nothing dispatched past the cap
        assert {k.split("_")[0] for k in meta.keys} == {"flat"}
        got = stats(metrics)
        assert {k: got[k] for k in ("offer_cap", "kept_groups", "filler_groups", "dropped_groups", "groups_offered",
                                    "n_rollouts", "optimizer_steps_skipped")} == \
            {"offer_cap": 1, "kept_groups": 0, "filler_groups": 1, "dropped_groups": 1, "groups_offered": 1,
             "n_rollouts": 0, "optimizer_steps_skipped": 0}
        assert REWARD_OVER[got["reward_over"]] == "offered" and got["reward_mean"] == pytest.approx(0.1)
        assert all(not any(r) for r in stored(meta.keys, "rm_scores"))
        assert all(any(m) for m in stored(meta.keys, "response_mask"))
        tq.kv_clear(keys=meta.keys, partition_id="train")

        # one of two kept: the latest dropped group fills the other slot with an all-zero response mask (out of
        # the update and the normalizer); the earlier dropped one is evicted
        put_group("keep", [1.5, 0.1, 0.0])
        put_group("flat1", [0.1, 0.1, 0.1])

        def refill(k):                           # scripted generator: flat groups only
            refills.append(k)
            for j in range(k):
                put_group(f"flat{len(refills) + 1}x{j}", [0.2, 0.2, 0.2])
        b = buffer(3, refill, size=2)
        meta, metrics = b.sample(global_steps=2, partition_id="train", batch_size=2)
        assert refills == [1]                    # 2 asked (2 per eviction), 1 room under the cap
        assert {k.split("_")[0] for k in meta.keys} == {"keep", "flat2x0"}
        got = stats(metrics)
        assert {k: got[k] for k in ("offer_cap", "kept_groups", "filler_groups", "dropped_groups", "groups_offered",
                                    "n_rollouts")} == \
            {"offer_cap": 1, "kept_groups": 1, "filler_groups": 1, "dropped_groups": 2, "groups_offered": 3,
             "n_rollouts": 3}
        assert REWARD_OVER[got["reward_over"]] == "kept" and got["reward_mean"] == pytest.approx(1.6 / 3)
        masks = dict(zip(sorted(meta.keys), stored(meta.keys, "response_mask")))
        assert all(not any(m) for k, m in masks.items() if k.startswith("flat2x0"))
        assert all(any(m) for k, m in masks.items() if k.startswith("keep"))
        assert not any(k.startswith("flat1") for k in (tq.kv_list() or {}).get("train", {}))
        tq.kv_clear(keys=meta.keys, partition_id="train")

        # the next step (as a resumed run's) starts afresh: a full step, nothing capped
        put_group("next", [1.0, 0.1, 0.1])
        put_group("next2", [1.5, 0.1, 0.1])
        meta, metrics = b.sample(global_steps=3, partition_id="train", batch_size=2)
        got = stats(metrics)
        assert {k.split("_")[0] for k in meta.keys} == {"next", "next2"} and refills == [1]
        assert (got["offer_cap"], got["kept_groups"], got["filler_groups"], got["groups_offered"]) == (0, 2, 0, 2)
    finally:
        tq.close()
    # a step that fills up under the cap: its offered count and turn-mismatch masks are in its metrics
    refills.clear()
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    try:
        put_group("flat", [0.1, 0.1, 0.1])

        def refill(k):                           # scripted generator: one varied group, one rollout mis-masked
            refills.append(k)
            put_group("varied", [1.5, 0.1, 0.0], broken=(2,))
        meta, metrics = buffer(3, refill).sample(global_steps=0, partition_id="train", batch_size=1)
    finally:
        tq.close()
    # one in flight at a time (max_inflight_gen_batches x train_batch_size = 1): 1 refill, 2 groups offered
    assert {k.split("_")[0] for k in meta.keys} == {"varied"} and refills == [1]
    assert metrics["training/execcritic/groups_offered"] == 2
    assert metrics["training/execcritic/turn_mismatch_masked"] == 1
    # the TRL path's per-step row (verl_launch.TRAINING_COLUMNS): kept "varied" with its mis-masked rollout out of
    # the reward summary, "flat" dropped, masked share over both offered groups
    got = {k.rsplit("/", 1)[1]: v for k, v in metrics.items() if k.startswith("training/execcritic/")}
    assert {k: got[k] for k in ("kept_groups", "dropped_groups", "n_rollouts")} == \
        {"kept_groups": 1, "dropped_groups": 1, "n_rollouts": 3}
    assert got["reward_mean"] == pytest.approx(0.8) and got["reward_std"] == pytest.approx(statistics.stdev([1.5, 0.1]))
    assert got["masked_share"] == pytest.approx(1 / 6)


def _put_group(uid, rewards, masked=(), broken=()):
    """Store one finished Repair group in TransferQueue as verl's TQ agent loop does (`AgentLoopOutput.as_dict`,
    keys `{uid}_{session}_{index}`, a finished prompt tag). `masked`: rollouts masked by the episode; `broken`:
    rollouts whose loss mask has one run of model tokens for their 2 turns (masked for the mismatch)."""
    import transfer_queue as tq
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    import execcritic.training.verl_adapter as va
    from execcritic.training.episodes import EpisodeResult
    from execcritic.training.policy import TrajectorySample

    keys, fields = [], []
    for i, reward in enumerate(rewards):
        mask = [1] * 6 if i in broken else [1, 1, 0, 0, 1, 1]
        sample = TrajectorySample([1, 2, 3], list(range(10, 16)), [-0.5] * 6, mask, 2)
        out = va.loop_output(EpisodeResult(sample, reward, i in masked, None, {}, "repair", object()), sample,
                             seconds=0.0)
        keys.append(f"{uid}_{i}_0")
        fields.append({**out.as_dict(), "uid": uid})
    tq.kv_batch_put(keys=keys, fields=list_of_dict_to_tensordict(fields), partition_id="train",
                    tags=[{"status": "success", "global_steps": 0}] * len(keys))
    tq.kv_put(key=uid, partition_id="train", tag={"is_prompt": True, "status": "finished", "global_steps": 0})
