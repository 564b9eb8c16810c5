"""Model layer: action parsing, the scripted stand-in, the OpenAI client's request/manifest, launch lines."""

from __future__ import annotations

import json

import jinja2
import jinja2.sandbox
import pytest
from typer.testing import CliRunner

from execcritic.agents.models import vllm as launch
from execcritic.agents.models.base import (
    BASH_TOOL,
    TEXT_ACTION_INSTRUCTIONS,
    Action,
    FormatError,
    ModelResponse,
    SamplingConfig,
    ScriptExhausted,
    build_response,
    format_error_text,
    parse_text_actions,
    parse_tool_call_actions,
)
from execcritic.agents.models.scripted import ScriptedModel
from execcritic.config import PAPER, ProtocolConfig, RepairConfig


def _call(command=None, name="bash", id="c1", arguments=None):
    args = arguments if arguments is not None else json.dumps({"command": command})
    return {"id": id, "type": "function", "function": {"name": name, "arguments": args}}


# --- listing 3 and the tool schema -------------------------------------------------------------------------
def test_listing3_verbatim():
    assert format_error_text("boom") == (
        "Tool call error: <error> boom </error> Every response must contain at least one standard bash tool "
        "call. Do not emit custom tools.")


def test_bash_tool_schema_is_one_command_string():
    fn = BASH_TOOL["function"]
    assert BASH_TOOL["type"] == "function" and fn["name"] == "bash"
    assert fn["parameters"]["required"] == ["command"]
    assert fn["parameters"]["properties"]["command"]["type"] == "string"


# --- sampling ------------------------------------------------------------------------------------------------
def test_sampling_presets_come_from_protocol_config():
    assert SamplingConfig.test_agent().max_tokens == 8192 == PAPER.test_agent.max_output_tokens
    assert SamplingConfig.test_agent().temperature is None  # Table 9a: backend default
    repair = SamplingConfig.repair_eval()
    assert repair.temperature == 0.6 and repair.top_p is None
    custom = ProtocolConfig(repair=RepairConfig(temperature=0.2))
    assert SamplingConfig.repair_eval(custom).temperature == 0.2
    rl = SamplingConfig.rl_rollout()
    assert (rl.temperature, rl.top_p, rl.top_k) == (1.0, 1.0, -1)


def test_sampling_request_fields_omit_unset():
    assert SamplingConfig().request_fields() == {}
    assert SamplingConfig(temperature=0.0, seed=3).request_fields() == {"temperature": 0.0, "seed": 3}
    assert SamplingConfig(top_k=-1).extra_fields() == {"top_k": -1}


# --- text actions ---------------------------------------------------------------------------------------------
def test_text_action_exactly_one_block():
    actions = parse_text_actions("I will look.\n```bash\nls -la /testbed\ncat x.py\n```\nThen decide.")
    assert actions == [Action(command="ls -la /testbed\ncat x.py", tool_call_id=None)]


@pytest.mark.parametrize("content, fragment", [
    ("no block here", "No ```bash block"),
    ("```python\nprint(1)\n```", "No ```bash block"),
    ("", "No ```bash block"),
    (None, "No ```bash block"),
    ("```bash\nls\n```\nand\n```bash\npwd\n```", "Found 2 ```bash blocks"),
    ("```bash\n\n```", "empty"),
])
def test_text_action_zero_two_or_empty_blocks_are_format_errors(content, fragment):
    with pytest.raises(FormatError) as info:
        parse_text_actions(content)
    assert fragment in str(info.value)


def test_text_action_ignores_blocks_inside_reasoning():
    content = "<think>maybe\n```bash\nrm -rf /\n```\n</think>OK:\n```bash\nls\n```"
    assert parse_text_actions(content) == [Action("ls")]


# --- tool calls -------------------------------------------------------------------------------------------------
def test_tool_calls_parse_into_actions_with_ids():
    actions = parse_tool_call_actions([_call("ls", id="a"), _call("pwd", id="b")])
    assert actions == [Action("ls", "a"), Action("pwd", "b")]
    # some servers give arguments as an object already
    assert parse_tool_call_actions([_call(arguments={"command": "ls"})]) == [Action("ls", "c1")]


@pytest.mark.parametrize("calls, fragment", [
    (None, "No tool calls"),
    ([], "No tool calls"),
    ([_call("ls", name="python")], "Unknown tool 'python'"),
    ([_call(arguments="{not json")], "not valid JSON"),
    ([_call(arguments=json.dumps(["ls"]))], "JSON object"),
    ([_call(arguments=json.dumps({"cmd": "ls"}))], "no non-empty 'command'"),
    ([_call(arguments=json.dumps({"command": "  "}))], "no non-empty 'command'"),
    ([_call(arguments=json.dumps({"command": "ls", "timeout": 3}))], "unknown arguments ['timeout']"),
    ([_call("ls"), _call("x", name="submit", id="c2")], "Unknown tool 'submit' in tool call 1"),
])
def test_invalid_tool_calls_are_format_errors(calls, fragment):
    with pytest.raises(FormatError) as info:
        parse_tool_call_actions(calls)
    assert fragment in str(info.value)


def test_format_error_carries_paid_turn_and_a_history_safe_message():
    usage = {"prompt_tokens": 10, "completion_tokens": 4}
    with pytest.raises(FormatError) as info:
        build_response("let me", [_call("ls", name="python")], tool_mode="tools", usage=usage, latency_s=1.5,
                       finish_reason="tool_calls")
    exc = info.value
    assert exc.usage == usage and exc.latency_s == 1.5 and exc.finish_reason == "tool_calls"
    assert exc.raw_message["tool_calls"][0]["function"]["name"] == "python"
    # the message to append has no tool_calls (nothing will answer their ids) but keeps what was said
    assert "tool_calls" not in exc.message and exc.message["role"] == "assistant"
    assert "let me" in exc.message["content"] and "python" in exc.message["content"]


def test_format_error_mentions_truncation():
    with pytest.raises(FormatError, match="cut off at the output-token limit"):
        build_response("```bash\nls", None, tool_mode="text", usage={}, latency_s=0.1, finish_reason="length")


def test_text_mode_rejects_tool_calls():
    with pytest.raises(FormatError, match="Tool calls are not available"):
        build_response("", [_call("ls")], tool_mode="text", usage={}, latency_s=0.0, finish_reason="tool_calls")


def test_tool_calls_without_ids_get_ids():
    call = _call("ls")
    del call["id"]
    response = build_response("", [call], tool_mode="tools", usage={}, latency_s=0.0, finish_reason=None,
                              turn_tag="7")
    assert response.actions == [Action("ls", "call_7_0")]
    assert response.message["tool_calls"][0]["id"] == "call_7_0"


# --- scripted stand-in ------------------------------------------------------------------------------------------
def test_scripted_model_replays_tool_calls_and_records_calls():
    model = ScriptedModel([["ls", "pwd"], ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]])
    first = model.query([{"role": "user", "content": "go"}])
    assert [a.command for a in first.actions] == ["ls", "pwd"]
    assert all(a.tool_call_id for a in first.actions)
    assert first.message["tool_calls"][1]["function"]["name"] == "bash"
    obs = model.observation_messages(first.actions, ["a b", "/testbed"])
    assert [m["role"] for m in obs] == ["tool", "tool"]
    assert obs[0]["tool_call_id"] == first.actions[0].tool_call_id
    second = model.query([{"role": "user", "content": "go"}, first.message, *obs])
    assert second.actions[0].command.startswith("echo COMPLETE")
    assert len(model.calls) == 2 and model.calls[1][-1]["content"] == "/testbed"
    assert model.remaining == 0
    with pytest.raises(ScriptExhausted, match="only 2 steps"):
        model.query([])


def test_scripted_model_format_errors_go_through_the_real_parser():
    model = ScriptedModel([[], "no block", {"content": "", "tool_calls": [_call("ls", name="edit")]}],
                          tool_mode="tools")
    with pytest.raises(FormatError, match="No tool calls"):
        model.query([{"role": "user", "content": "x"}])
    with pytest.raises(FormatError, match="No tool calls"):  # tools mode: prose is no action
        model.query([{"role": "user", "content": "x"}])
    with pytest.raises(FormatError, match="Unknown tool 'edit'") as info:
        model.query([{"role": "user", "content": "x"}])
    replies = model.format_error_messages(info.value)
    assert replies[0]["role"] == "assistant" and "tool_calls" not in replies[0]
    assert replies[1] == {"role": "user", "content": format_error_text(info.value.error)}


def test_scripted_model_text_mode():
    model = ScriptedModel([["ls"], "```bash\npwd\n```", ["a", "b"]], tool_mode="text")
    first = model.query([{"role": "system", "content": "S"}, {"role": "user", "content": "go"}])
    assert first.actions == [Action("ls")] and "tool_calls" not in first.message
    assert model.calls[0][0]["content"].endswith(TEXT_ACTION_INSTRUCTIONS)
    assert model.observation_messages(first.actions, ["out"]) == [{"role": "user", "content": "out"}]
    assert model.query([]).actions == [Action("pwd")]
    with pytest.raises(FormatError, match="Found 2"):
        model.query([])


def test_scripted_model_callable_reacts_to_feedback():
    def react(messages):
        last = messages[-1]["content"]
        return ["echo fixed"] if "FAILED" in last else ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]

    model = ScriptedModel([react, react])
    assert model.query([{"role": "user", "content": "test FAILED"}]).actions[0].command == "echo fixed"
    assert model.query([{"role": "user", "content": "ok"}]).actions[0].command.startswith("echo COMPLETE")
    fixed = ModelResponse(message={"role": "assistant", "content": ""}, actions=[Action("x", "id")],
                          usage={"prompt_tokens": 1, "completion_tokens": 1}, latency_s=0.0)
    assert ScriptedModel([lambda m: fixed]).query([]) is fixed
    assert "scripted stand-in" in model.serialize()["note"]


# --- OpenAI client: request shape and manifest (no network) -------------------------------------------------
def test_openai_request_body_tools_mode():
    from execcritic.agents.models.openai_model import OpenAIChatModel

    model = OpenAIChatModel("http://127.0.0.1:9/v1", "m", sampling=SamplingConfig(temperature=0.6, max_tokens=8192,
                                                                                     seed=1, top_k=-1),
                            extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    body = model.request_body(messages)
    assert body["tools"] == [BASH_TOOL] and body["messages"] == messages
    assert body["temperature"] == 0.6 and body["max_tokens"] == 8192 and body["seed"] == 1
    assert body["extra_body"] == {"chat_template_kwargs": {"enable_thinking": False}, "top_k": -1}
    assert "tool_choice" not in body  # transformers serve ignores it; vLLM defaults to auto
    model2 = OpenAIChatModel("http://x/v1", "m", sampling=SamplingConfig(max_tokens=5),
                             max_tokens_param="max_completion_tokens")
    assert model2.request_body(messages)["max_completion_tokens"] == 5


def test_openai_request_body_text_mode_adds_instructions_without_touching_history():
    from execcritic.agents.models.openai_model import OpenAIChatModel

    model = OpenAIChatModel("http://127.0.0.1:9/v1", "m", tool_mode="text")
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    body = model.request_body(messages)
    assert "tools" not in body
    assert body["messages"][0]["content"] == "S\n\n" + TEXT_ACTION_INSTRUCTIONS
    assert messages[0]["content"] == "S"
    no_system = model.request_body([{"role": "user", "content": "U"}])["messages"]
    assert no_system[0] == {"role": "system", "content": TEXT_ACTION_INSTRUCTIONS}


def test_api_key_is_never_serialized(monkeypatch):
    from execcritic.agents.models.openai_model import OpenAIChatModel

    secret = "sk-test-SENTINEL-4f9a0c"
    monkeypatch.setenv("EXECCRITIC_TEST_KEY", secret)
    model = OpenAIChatModel("https://user:pw@api.example.invalid/v1", "gpt-x", api_key_env="EXECCRITIC_TEST_KEY")
    client = model._get_client()
    assert client.api_key == secret  # it does reach the SDK client...
    manifest = json.dumps(model.serialize())
    assert secret not in manifest and secret not in repr(model)  # ...and nothing else
    assert "pw" not in model.serialize()["base_url"] and "user" not in model.serialize()["base_url"]
    assert model.serialize()["api_key_env"] == "EXECCRITIC_TEST_KEY"
    assert not any(secret in repr(v) for k, v in vars(model).items() if k != "_client")


def test_openai_model_rejects_bad_settings():
    from execcritic.agents.models.openai_model import OpenAIChatModel

    with pytest.raises(ValueError, match="tool_mode"):
        OpenAIChatModel("http://x/v1", "m", tool_mode="json")
    with pytest.raises(ValueError, match="max_tokens_param"):
        OpenAIChatModel("http://x/v1", "m", max_tokens_param="n")


def test_retries_are_the_sdks_with_the_configured_count():
    """Transient failures are retried by the OpenAI SDK (backoff, Retry-After); ours only sets how often."""
    from execcritic.agents.models.openai_model import OpenAIChatModel

    model = OpenAIChatModel("http://x/v1", "m", max_retries=3, api_key_env=None)
    assert model._get_client().max_retries == 3 and model.serialize()["max_retries"] == 3


# --- the SmolLM2 tool-aware template keeps SmolLM2's own rendering when there are no tools ------------------
SMOLLM2_ORIGINAL_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def _render(template, **kw):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x: json.dumps(x)
    return env.from_string(template).render(**kw)


@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": "What is 2+3?"}],
    [{"role": "system", "content": "S"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"},
     {"role": "user", "content": "<returncode>0</returncode>"}],
])
def test_tool_template_is_smollm2_template_without_tools(messages):
    from execcritic.agents.models.local_server import TOOL_CHAT_TEMPLATE

    for gen in (True, False):
        assert _render(TOOL_CHAT_TEMPLATE, messages=messages, add_generation_prompt=gen, tools=None) == _render(
            SMOLLM2_ORIGINAL_TEMPLATE, messages=messages, add_generation_prompt=gen)


def test_tool_template_renders_tools_calls_and_responses():
    from execcritic.agents.models.local_server import TOOL_CHAT_TEMPLATE

    messages = [{"role": "user", "content": "list"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}]},
                {"role": "tool", "tool_call_id": "c", "content": "a b"}]
    text = _render(TOOL_CHAT_TEMPLATE, messages=messages, add_generation_prompt=True, tools=[BASH_TOOL])
    assert "<tools>\n" + json.dumps(BASH_TOOL) in text
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>' \
           '<|im_end|>' in text
    assert "<|im_start|>user\n<tool_response>\na b\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")


# --- vLLM / SGLang launch lines ----------------------------------------------------------------------------------
def test_vllm_command_is_the_papers():
    argv = launch.vllm_command(launch.VLLMServeConfig(model="/ckpt/Qwen3.5-35B-A3B"))
    assert argv[:3] == ["vllm", "serve", "/ckpt/Qwen3.5-35B-A3B"]
    line = launch.shell_line(argv)
    for flag in ("--tensor-parallel-size 2", "--enable-expert-parallel", "--max-model-len 65536",
                 "--enable-auto-tool-choice", "--tool-call-parser qwen3_coder", "--reasoning-parser qwen3",
                 "--language-model-only", "--enable-prefix-caching", "--host 127.0.0.1", "--port 8000",
                 "--served-model-name qwen3.5-35b-a3b"):
        assert flag in line, flag
    assert "--data-parallel-size" not in line


def test_vllm_command_variants():
    argv = launch.vllm_command(launch.VLLMServeConfig(
        model="m", tensor_parallel_size=4, data_parallel_size=2, enable_expert_parallel=False,
        tool_call_parser=None, reasoning_parser=None, extra_args=("--max-num-seqs", "8")))
    line = launch.shell_line(argv)
    assert "--tensor-parallel-size 4 --data-parallel-size 2" in line
    assert "--enable-expert-parallel" not in line and "--tool-call-parser" not in line
    assert "--enable-auto-tool-choice" not in line and "--reasoning-parser" not in line
    assert argv[-2:] == ["--max-num-seqs", "8"]
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        launch.vllm_command(launch.VLLMServeConfig(model="m", tensor_parallel_size=0))


def test_sglang_presets():
    line = launch.shell_line(launch.sglang_command(launch.SGLangServeConfig.repair_rollout("m")))
    assert line.startswith("python -m sglang.launch_server --model-path m")
    for flag in ("--tp-size 2", "--dp-size 2", "--ep-size 2", "--enable-dp-attention", "--context-length 65536",
                 "--tool-call-parser qwen3_coder", "--reasoning-parser qwen3", "--mem-fraction-static 0.7"):
        assert flag in line, flag
    test_line = launch.shell_line(launch.sglang_command(launch.SGLangServeConfig.test_agent_rollout("m")))
    assert "--tp-size 1" in test_line and "--dp-size" not in test_line
    with pytest.raises(ValueError, match="dp >= 2"):
        launch.sglang_command(launch.SGLangServeConfig(model="m", enable_dp_attention=True))


def test_cli_serve_print_and_missing_engine():
    from execcritic.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["serve", "vllm", "--model", "/ckpt", "--tp", "4", "--print"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == launch.shell_line(launch.vllm_command(
        launch.VLLMServeConfig(model="/ckpt", tensor_parallel_size=4)))
    result = runner.invoke(app, ["serve", "vllm", "--model", "/ckpt", "--no-ep", "--print", "--json", "--",
                                 "--max-num-seqs", "8"])
    data = json.loads(result.output)
    assert "--enable-expert-parallel" not in data["argv"] and data["argv"][-2:] == ["--max-num-seqs", "8"]
    result = runner.invoke(app, ["serve", "sglang", "--model", "/ckpt", "--preset", "repair-rollout", "--print"])
    assert result.exit_code == 0 and "--enable-dp-attention" in result.output
    result = runner.invoke(app, ["serve", "sglang", "--model", "/ckpt", "--preset", "nope", "--print"])
    assert result.exit_code == 2


def test_cli_serve_vllm_without_vllm_fails_clearly(monkeypatch):
    from execcritic.cli import app

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(launch.shutil, "which", lambda name: None)
    monkeypatch.setattr(launch.sys, "executable", "/nonexistent/python")
    result = CliRunner().invoke(app, ["serve", "vllm", "--model", "/ckpt"])
    assert result.exit_code == 2
    assert "vllm is not installed" in result.output and "--print" in result.output


def test_model_spec_options():
    from execcritic.errors import InputError
    from execcritic.pipeline.models import make_model
    from execcritic.tasks.model import Task

    task = Task.__new__(Task)  # make_model only passes it to scripted factories
    m = make_model("openai-text:http://127.0.0.1:9/v1#m?max_tokens=128&context_window=8192", task=task, role="repair")
    assert (m.tool_mode, m.reply_tokens, m.context_window) == ("text", 128, 8192)
    assert m.serialize()["context_window"] == 8192
    for bad in ("openai:http://x/v1#m?context_window=8k", "openai:http://x/v1#m?max_tokens=0",
                "openai:http://x/v1#m?temperature=1", "openai:http://x/v1"):
        with pytest.raises(InputError, match="model spec"):
            make_model(bad, task=task, role="repair")
