"""The in-process policy backend: Qwen3.5 tool-call parsing, and real multi-turn episodes of the tiny
Qwen3.5-MoE through the real agent loop (`Session`) in a real bubblewrap sandbox, assembled into one
trajectory-level sample whose masks, logprobs and token ids are checked against the model and the template."""

from __future__ import annotations

import contextlib
import itertools
import json

import pytest

from execcritic.agents.loop import SUBMIT_MARKER, Session, Submitted, Trajectory
from execcritic.agents.models.base import (
    ContextWindowExceeded,
    FormatError,
    SamplingConfig,
    format_error_text,
)
from execcritic.training.policy import HFPolicy, TemplateDriftError, parse_completion
from tests.training_fixtures import ForcedTurns, bash_call_text

SYSTEM = {"role": "system", "content": "You are a careful software engineer. Use the bash tool."}
USER = {"role": "user", "content": "The add function in calc.py is wrong. Inspect it."}


# --------------------------------------------------------------------------------------------------
# Parsing (pure)
# --------------------------------------------------------------------------------------------------

def test_parse_xml_tool_call_into_openai_shape():
    text = "Let me look.\n\n" + bash_call_text("cat calc.py\nls -la") + "\n" + bash_call_text("pwd")
    content, reasoning, calls = parse_completion(text)
    assert content == "Let me look."
    assert reasoning is None
    assert [c["function"]["name"] for c in calls] == ["bash", "bash"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"command": "cat calc.py\nls -la"}
    assert json.loads(calls[1]["function"]["arguments"]) == {"command": "pwd"}


def test_parse_hermes_json_and_reasoning():
    text = "<think>\nplan\n</think>\n\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>"
    content, reasoning, calls = parse_completion(text)
    assert (content, reasoning) == ("", "plan")
    assert json.loads(calls[0]["function"]["arguments"]) == {"command": "ls"}


@pytest.mark.parametrize("text", ["<tool_call>\n<function=bash>\n<parameter=command>\nls",   # unclosed
                                  "<tool_call>not a call</tool_call>", "just prose"])
def test_malformed_or_missing_calls_yield_no_tool_calls(text):
    content, _, calls = parse_completion(text)
    assert calls == [] and content == text.strip()


# --------------------------------------------------------------------------------------------------
# Real model, real loop, real sandbox
# --------------------------------------------------------------------------------------------------

def _encode(tok, text):
    return tok.encode(text, add_special_tokens=False)


def _run(policy, sandbox, max_turns):
    trajectory = Trajectory()
    session = Session(policy, sandbox, trajectory=trajectory, format_error=format_error_text)
    session.messages.extend([dict(SYSTEM), dict(USER)])
    submitted = None
    try:
        while session.turns < max_turns:
            session.step()
    except Submitted as exc:
        submitted = exc
    return session, submitted


def _forward_logprobs(model, ids):
    import torch

    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits, dim=-1)


@pytest.mark.train
def test_episode_through_session_masks_logprobs_and_alignment(tiny_model, tiny_repo):
    from execcritic.sandbox.local import LocalSandbox

    model, tok = tiny_model
    stop = tok.convert_tokens_to_ids("<|im_end|>")
    first = _encode(tok, bash_call_text("cat calc.py && echo MARK-$((6*7))"))
    submit = _encode(tok, bash_call_text(f"echo {SUBMIT_MARKER}"))
    forced = ForcedTurns([first, None, submit], stop)
    policy = HFPolicy(model, tok, sampling=SamplingConfig.rl_rollout(max_tokens=max(len(first), len(submit)) + 8,
                                                                      seed=3), logits_processor=forced)
    with LocalSandbox(tiny_repo, isolated=True) as sandbox:
        session, submitted = _run(policy, sandbox, max_turns=5)

    # the loop ran: a real command in the sandbox, a format error on the free turn, then the submit marker
    assert submitted is not None and submitted.marker == SUBMIT_MARKER
    assert session.turns == 3
    tool_msgs = [m for m in session.messages if m["role"] == "tool"]
    assert "MARK-42" in tool_msgs[0]["content"] and "return a - b" in tool_msgs[0]["content"]
    assert any("Tool call error" in m["content"] for m in session.messages if m["role"] == "user")

    sample = policy.assemble_sample()
    turns = policy.turns
    assert sample.turns == 3 and sample.prompt_ids == turns[0].prompt_ids
    assert len(sample.completion_ids) == len(sample.logprobs) == len(sample.env_mask)
    model_ids = [t for t, m in zip(sample.completion_ids, sample.env_mask) if m]
    env_ids = [t for t, m in zip(sample.completion_ids, sample.env_mask) if not m]
    # mask 1 exactly on the ids the model sampled, in order; mask 0 exactly on the template/tool/feedback tokens
    assert model_ids == [i for t in turns for i in t.completion_ids]
    assert env_ids == [i for t in turns[1:] for i in t.env_ids]
    env_text = tok.decode(env_ids)
    assert "MARK-42" in env_text and "<tool_response>" in env_text            # tool output: loss mask 0
    assert "Every response must contain at least one standard bash tool call" in env_text  # Listing 3: mask 0
    assert "MARK-42" not in tok.decode(model_ids)
    im_start = tok.convert_tokens_to_ids("<|im_start|>")
    assert all(m == 0 for t, m in zip(sample.completion_ids, sample.env_mask) if t == im_start)  # role envelopes
    for prev, cur in itertools.pairwise(turns):  # a truncated turn's missing end-of-turn token is the template's
        first = cur.env_ids[0]
        assert first == (stop if prev.finish_reason == "length" else _encode(tok, "\n")[0])
    # forced turns render exactly as the template renders their parsed messages
    assert 0 not in sample.noncanonical_turns and 2 not in sample.noncanonical_turns

    # logprobs: the model's own (temperature 1) log-probabilities of the sampled ids, 0.0 on env tokens
    logp = _forward_logprobs(model, sample.prompt_ids + sample.completion_ids)
    p = len(sample.prompt_ids)
    for k, (tid, m, lp) in enumerate(zip(sample.completion_ids, sample.env_mask, sample.logprobs)):
        if m:
            assert abs(float(logp[p + k - 1, tid]) - lp) < 1e-3, k
        else:
            assert lp == 0.0


@pytest.mark.train
def test_sampled_ids_are_recorded_not_retokenized(tiny_model, tiny_repo):
    """A turn sampled as single characters renders to the same text as the canonical BPE tokenization; the sample
    must keep the ids the model sampled, and still equal the template's rendering of the final conversation."""
    from execcritic.sandbox.local import LocalSandbox

    model, tok = tiny_model
    stop = tok.convert_tokens_to_ids("<|im_end|>")
    body = "\n<function=bash>\n<parameter=command>\nimport_check=$(grep -c return calc.py); echo $import_check\n" \
           "</parameter>\n</function>\n"
    charwise = [_encode(tok, c) for c in body]
    assert all(len(ids) == 1 for ids in charwise)
    forced_first = _encode(tok, "<tool_call>") + [ids[0] for ids in charwise] + _encode(tok, "</tool_call>")
    canonical_first = _encode(tok, "<tool_call>" + body + "</tool_call>")
    assert forced_first != canonical_first and len(canonical_first) < len(forced_first)
    submit = _encode(tok, bash_call_text(f"echo {SUBMIT_MARKER}"))
    forced = ForcedTurns([forced_first, submit], stop)
    policy = HFPolicy(model, tok, sampling=SamplingConfig.rl_rollout(
        max_tokens=max(len(forced_first), len(submit)) + 8, seed=5), logits_processor=forced)
    with LocalSandbox(tiny_repo, isolated=True) as sandbox:
        session, submitted = _run(policy, sandbox, max_turns=4)
    assert submitted is not None
    assert session.messages[3]["content"].startswith("<returncode>0</returncode>")
    sample = policy.assemble_sample(strict_roundtrip=True)   # text == the template's rendering, end to end
    assert sample.rendering_matches and sample.noncanonical_turns == []
    first_turn = sample.completion_ids[:len(forced_first) + 1]
    assert first_turn == forced_first + [stop]                # what was sampled, not the canonical re-encoding
    assert policy.turns[1].prompt_ids[:len(sample.prompt_ids) + len(first_turn)] == sample.prompt_ids + first_turn


@pytest.mark.train
def test_template_drift_is_an_error_not_a_misaligned_mask(tiny_model, tiny_repo):
    """Qwen3.5's shipped template drops earlier think blocks once a new user message arrives (here: Listing 3
    after a format error). Rendering with it must fail loudly; the default (TRL's prefix-preserving variant)
    handles the same episode."""
    from execcritic.sandbox.local import LocalSandbox

    model, tok = tiny_model
    stop = tok.convert_tokens_to_ids("<|im_end|>")

    first = _encode(tok, bash_call_text("ls"))

    def policy(template):
        forced = ForcedTurns([first, None, None], stop)
        return HFPolicy(model, tok, sampling=SamplingConfig.rl_rollout(max_tokens=len(first) + 8, seed=1),
                        chat_template=template, logits_processor=forced)

    original = policy(tok.chat_template)
    with LocalSandbox(tiny_repo, isolated=True) as sandbox:
        session = Session(original, sandbox, trajectory=Trajectory(), format_error=format_error_text)
        session.messages.extend([dict(SYSTEM), dict(USER)])
        session.step()                                   # a real `ls` in the sandbox: tool messages keep the prefix
        assert session.messages[-1]["role"] == "tool" and "calc.py" in session.messages[-1]["content"]
        session.step()                                   # free text -> format error -> Listing 3 as a *user* message
        assert session.messages[-1]["role"] == "user"
        with pytest.raises(TemplateDriftError, match="prefix-preserving"):
            session.step()

    default = policy(None)
    assert default.template_source == "trl-training-variant"
    with LocalSandbox(tiny_repo, isolated=True) as sandbox:
        _run(default, sandbox, max_turns=3)
    good = default.turns
    assert default.assemble_sample().turns == 3

    # tampering with a recorded envelope is caught against the final conversation's rendering
    bad = [good[0], *[type(t)(**t.__dict__) for t in good[1:]]]
    bad[1].env_ids = bad[1].env_ids[:-1]
    bad[1].prompt_ids = good[0].prompt_ids + good[0].completion_ids + bad[1].env_ids
    bad[2].prompt_ids = bad[1].prompt_ids + bad[1].completion_ids + bad[2].env_ids
    with pytest.raises(TemplateDriftError, match="envelope before turn 1"):
        default.assemble_sample(bad)

    # a history rewritten between turns cannot be one token sequence
    default.begin_episode()
    for msgs in ([dict(SYSTEM), dict(USER)], [dict(SYSTEM, content="another system prompt"), dict(USER)]):
        with contextlib.suppress(FormatError):   # random text is a format error; only the records matter here
            default.query(msgs)
    assert default.turns[1].continues is False
    with pytest.raises(TemplateDriftError, match="rewritten"):
        default.assemble_sample()


@pytest.mark.train
def test_seeded_sampling_is_reproducible_and_episodes_differ(tiny_model):
    model, tok = tiny_model
    sampling = SamplingConfig.rl_rollout(max_tokens=12, seed=7)

    def sample_once(policy, seed=None):
        policy.begin_episode(seed)
        with contextlib.suppress(FormatError):   # random text is a format error; the record is what we compare
            policy.query([dict(SYSTEM), dict(USER)])
        return policy.turns[0].completion_ids, policy.turns[0].logprobs

    a, b = HFPolicy(model, tok, sampling=sampling), HFPolicy(model, tok, sampling=sampling)
    assert sample_once(a) == sample_once(b)
    assert sample_once(a, seed=11) == sample_once(b, seed=11)
    assert sample_once(a, seed=11)[0] != sample_once(a, seed=12)[0]
    entry = a.serialize()
    assert entry["sampling"]["seed"] == 7 and entry["architecture"] == "Qwen3_5MoeForCausalLM"
    assert entry["chat_template_source"] == "trl-training-variant"


@pytest.mark.train
def test_context_window_is_an_operational_stop(tiny_model):
    model, tok = tiny_model
    policy = HFPolicy(model, tok, context_window=64)
    with pytest.raises(ContextWindowExceeded):
        policy.query([dict(SYSTEM), dict(USER)])
    assert policy.turns == []
