"""An in-process Hugging Face causal LM as a `ChatModel`, recording what RL needs from every turn.

The agent loop (`execcritic.agents.loop.Session`) talks to this backend exactly as it talks to an
OpenAI-compatible server: `query(messages) -> ModelResponse`, tool calls parsed into the OpenAI shape and
validated by `build_response`, so a turn without a valid bash call raises the same `FormatError`.

What differs is that the backend is *token-in/token-out*, as the paper's engine (slime + SGLang `/generate`)
is: the prompt of every later turn is the previous prompt, then the ids the model sampled (never decoded and
re-tokenized), then the tokens the chat template adds for the new messages (tool outputs, harness feedback,
role envelopes). So one episode is one token sequence, and `assemble_sample` turns the per-turn records into
ONE trajectory-level sample: `prompt_ids` (the first prompt), `completion_ids` (everything after it),
`logprobs` (the sampling-time logprob of each model token, 0.0 elsewhere) and `env_mask` (1 exactly on
model-sampled tokens). Template drift - a chat template that renders earlier turns differently once later
messages arrive, which would silently shift every mask after it - raises `TemplateDriftError`, both while
the episode runs and again when the sample is assembled (against the rendering of the final conversation).

Chat template: Qwen3.5's own template drops the (empty) think block of every assistant turn before the latest
user message, so a harness-feedback or format-error *user* message re-renders the history. Like TRL's tool
loop, the policy therefore renders with TRL's prefix-preserving training variant of a known template
(`trl.chat_template_utils.get_training_chat_template`); the first prompt is identical either way.

Logprobs are `log_softmax(logits / temperature)` of the sampled token at the sampling step, before top-p/top-k
truncation and before any `logits_processor`: the tempered policy distribution, which is what TRL recomputes for
the importance ratio. Everything runs on the model's device in one sequence (batch 1); this backend is for CPU
tests and tiny ablations, the GPU engine for the 35B model is slime.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from execcritic.agents.models.base import (
    BASH_TOOL,
    ChatModel,
    ContextWindowExceeded,
    FormatError,
    ModelResponse,
    SamplingConfig,
    build_response,
)
from execcritic.errors import ExecCriticError

# (ids generated so far in this turn, next-token logits) -> logits to sample from (constrained decoding).
LogitsProcessor = Callable[[list[int], Any], Any]

_SENTINEL = "EXECCRITICASSISTANTBODY"
_TOOL_BLOCK_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FUNCTION_RE = re.compile(r"\A\s*<function=([^\n>]+)>(.*?)</function>\s*\Z", re.DOTALL)
_PARAM_RE = re.compile(r"<parameter=([^>\n]+)>(.*?)</parameter>", re.DOTALL)


class TemplateDriftError(ExecCriticError):
    """The chat template does not render the conversation as the token sequence recorded for it: appending
    messages changed how earlier turns render, or the history was rewritten between turns. A trajectory-level
    sample built anyway would put its loss mask on the wrong tokens."""


# --------------------------------------------------------------------------------------------------
# Parsing a completion (pure)
# --------------------------------------------------------------------------------------------------

def _strip_one_newline(value: str) -> str:
    """The template writes `<parameter=k>\\n` + value + `\\n</parameter>`: undo exactly that."""
    return value.removeprefix("\n").removesuffix("\n")


def parse_completion(text: str) -> tuple[str, str | None, list[dict[str, Any]]]:
    """(content, reasoning, OpenAI-shaped tool_calls) from a Qwen3.5 completion.

    Tool calls are `<tool_call><function=NAME><parameter=K>\\nV\\n</parameter></function></tool_call>` (the
    Qwen3.5/qwen3_coder XML format); a Hermes-style JSON body inside `<tool_call>` is accepted too (SmolLM2's
    template). Parameter values stay strings (the bash tool's only argument is a string). A malformed block
    yields no tool calls at all and the raw text as content, as a vLLM/SGLang parser does, so the loop answers
    it with Listing 3. A `</think>` splits off reasoning the way the template does."""
    reasoning = None
    if "</think>" in text:
        head, text = text.split("</think>", 1)
        reasoning = head.split("<think>")[-1].strip("\n") or None
        text = text.lstrip("\n")
    start = text.find("<tool_call>")
    if start < 0:
        return text.strip(), reasoning, []
    calls: list[dict[str, Any]] = []
    for block in _TOOL_BLOCK_RE.finditer(text, start):
        body = block.group(1)
        fm = _FUNCTION_RE.match(body)
        if fm:
            params = {k.strip(): _strip_one_newline(v) for k, v in _PARAM_RE.findall(fm.group(2))}
            calls.append({"type": "function", "function": {"name": fm.group(1).strip(), "arguments": json.dumps(params)}})
            continue
        try:
            obj = json.loads(body)
        except ValueError:
            return text.strip(), reasoning, []
        if not isinstance(obj, dict) or "name" not in obj:
            return text.strip(), reasoning, []
        args = obj.get("arguments", {})
        calls.append({"type": "function", "function": {"name": obj["name"],
                                                       "arguments": args if isinstance(args, str) else json.dumps(args)}})
    if not calls:
        return text.strip(), reasoning, []
    return text[:start].strip(), reasoning, calls


# --------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------

def _template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-shaped history -> what Jinja chat templates iterate: tool-call arguments as mappings."""
    out = []
    for m in messages:
        if m.get("tool_calls"):
            m = copy.deepcopy(m)
            for call in m["tool_calls"]:
                fn = call.get("function") or call
                if isinstance(fn.get("arguments"), str):
                    try:
                        fn["arguments"] = json.loads(fn["arguments"] or "{}")
                    except ValueError as exc:
                        raise TemplateDriftError(f"tool call arguments are not JSON and cannot be rendered: "
                                                 f"{fn['arguments'][:200]!r}") from exc
        out.append(m)
    return out


def choose_chat_template(tokenizer) -> tuple[str, str]:
    """(template, source): TRL's prefix-preserving training variant of a known template, else the tokenizer's."""
    try:
        from trl.chat_template_utils import get_training_chat_template  # lazy: train extra

        return get_training_chat_template(tokenizer), "trl-training-variant"
    except (ImportError, ValueError):
        if not tokenizer.chat_template:
            raise ValueError("the tokenizer has no chat template") from None
        return tokenizer.chat_template, "tokenizer"


@dataclass
class ChatRenderer:
    """Renders conversations with one template and tokenizes text without special-token insertion."""

    tokenizer: Any
    chat_template: str

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *,
               generation_prompt: bool) -> str:
        try:
            return self.tokenizer.apply_chat_template(_template_messages(messages), tools=tools,
                                                      chat_template=self.chat_template, tokenize=False,
                                                      add_generation_prompt=generation_prompt)
        except TemplateDriftError:
            raise
        except Exception as exc:  # jinja raises its own errors (raise_exception in the template)
            raise TemplateDriftError(f"the chat template cannot render this conversation: {exc}") from exc

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def closing(self, history: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        """What the template writes after an assistant turn's body (for Qwen: `<|im_end|>\\n`)."""
        text = self.render([*history, {"role": "assistant", "content": _SENTINEL}], tools, generation_prompt=False)
        if text.count(_SENTINEL) != 1:
            raise TemplateDriftError("cannot locate the assistant turn in the template's rendering")
        return text.split(_SENTINEL, 1)[1]

    def digest(self) -> str:
        return hashlib.sha256(self.chat_template.encode()).hexdigest()


# --------------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------------

@dataclass
class TurnRecord:
    """One model call. `prompt_ids` is the exact sequence the model was conditioned on; for a continuing turn it
    is the previous prompt + previous completion + `env_ids`. `completion_ids` are the sampled ids, verbatim."""

    index: int
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    env_ids: list[int]                 # template tokens before this prompt's end that no model sampled
    continues: bool                    # True: prompt_ids extends the previous turn's sequence
    finish_reason: str                 # "stop" (a stop token was sampled, and is kept) or "length"
    messages: list[dict[str, Any]]     # the conversation this turn answered (shallow copy)
    tools: list[dict[str, Any]] | None
    text: str = ""                     # decoded completion (stop token excluded)
    assistant_message: dict[str, Any] | None = None   # as returned in ModelResponse
    history_message: dict[str, Any] | None = None     # as a FormatError asks the loop to append it
    format_error: str | None = None
    generate_s: float = 0.0            # wall seconds the backend spent sampling this turn (measurement only)

    @property
    def loss_mask(self) -> list[int]:
        """Every sampled token is trained on (the stop token included: the model must learn to stop)."""
        return [1] * len(self.completion_ids)


@dataclass
class TrajectorySample:
    """One trajectory-level training sample (TRL `rollout_func` / slime `Sample` shape)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    env_mask: list[int]
    turns: int
    finish_reasons: list[str] = field(default_factory=list)
    noncanonical_turns: list[int] = field(default_factory=list)  # sampled text the template would render otherwise
    rendering_matches: bool = False    # decoded sequence == template rendering of the final conversation

    @property
    def loss_mask(self) -> list[int]:
        return self.env_mask

    @property
    def model_tokens(self) -> int:
        return sum(self.env_mask)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------------------------------
# Assembling and checking a trajectory
# --------------------------------------------------------------------------------------------------

def _stop_stripped(closing: str, stop_text: str | None) -> str:
    return closing[len(stop_text):] if stop_text and closing.startswith(stop_text) else closing


def _assistant_index(turn: TurnRecord) -> int:
    return len(turn.messages)


def assemble_sample(turns: list[TurnRecord], renderer: ChatRenderer, *, strict_roundtrip: bool = False
                    ) -> TrajectorySample:
    """Concatenate an episode's turns into one sample and check it against the final conversation.

    Checks (each failure is a TemplateDriftError, never a silent misalignment):
    1. every turn continues the previous one (one token sequence; no history rewrite);
    2. every turn's prompt is exactly the running sequence: previous model ids verbatim (no re-tokenization);
    3. the non-model segments equal the tokens of the template's rendering of the FINAL conversation with each
       assistant body cut out, so masks sit where the template puts message boundaries;
    4. with `strict_roundtrip`, the decoded sequence must also equal the template's rendering of the final
       conversation itself (it does whenever the model's text is what the template renders for its parsed
       message; a random model's text rarely is, which is not an error of the sample: see `noncanonical_turns`).
    """
    if not turns:
        raise ValueError("no turns to assemble: the episode made no model call")
    for t in turns[1:]:
        if not t.continues:
            raise TemplateDriftError(f"turn {t.index} does not continue turn {t.index - 1}: the conversation history "
                                     "was rewritten between turns, so one token sequence cannot represent it")
    last = turns[-1]
    if last.assistant_message is None and last.history_message is None:
        raise ValueError("the last turn has no assistant message recorded")
    prompt_ids = list(turns[0].prompt_ids)
    completion: list[int] = []
    logprobs: list[float] = []
    mask: list[int] = []
    for i, t in enumerate(turns):
        if i:
            completion += t.env_ids
            logprobs += [0.0] * len(t.env_ids)
            mask += [0] * len(t.env_ids)
        if t.prompt_ids != prompt_ids + completion:
            raise TemplateDriftError(f"turn {t.index}'s prompt is not the running token sequence (previous prompt, "
                                     "sampled ids, template envelope)")
        if len(t.logprobs) != len(t.completion_ids):
            raise ValueError(f"turn {t.index}: {len(t.logprobs)} logprobs for {len(t.completion_ids)} tokens")
        completion += t.completion_ids
        logprobs += t.logprobs
        mask += t.loss_mask

    # 3. the final conversation, each assistant body replaced by a sentinel, split at the sentinels
    final = [*last.messages, last.history_message or last.assistant_message]
    slots = [_assistant_index(t) for t in turns]
    cut = list(final)
    for k, pos in enumerate(slots):
        if final[pos].get("role") != "assistant":
            raise TemplateDriftError(f"message {pos} of the final conversation is not turn {k}'s assistant message")
        cut[pos] = {"role": "assistant", "content": f"{_SENTINEL}{k:05d}X"}
    text = renderer.render(cut, last.tools, generation_prompt=False)
    segments = re.split(rf"{_SENTINEL}\d{{5}}X", text)
    if len(segments) != len(turns) + 1:
        raise TemplateDriftError("the template's rendering of the final conversation lost or duplicated an "
                                 "assistant turn")
    if renderer.encode(segments[0]) != turns[0].prompt_ids:
        raise TemplateDriftError("the first prompt differs from the template's rendering of the final "
                                 "conversation: later messages changed how the opening renders")
    for k in range(1, len(turns)):
        prev = turns[k - 1]
        stop_text = renderer.decode(prev.completion_ids[-1:]) if prev.finish_reason == "stop" else None
        expected = renderer.encode(_stop_stripped(segments[k], stop_text))
        if expected != turns[k].env_ids:
            raise TemplateDriftError(
                f"the envelope before turn {k} was {renderer.decode(turns[k].env_ids)!r} when sampled, but the "
                f"template renders the final conversation with {renderer.decode(expected)!r} there: the template "
                "is not prefix-preserving for these messages, so the loss mask would be misaligned")

    # 4. canonical round-trip per turn, and of the whole sequence
    noncanonical = []
    for k, t in enumerate(turns):
        closing = renderer.closing(t.messages, t.tools)
        msg = t.history_message or t.assistant_message
        full = renderer.render([*t.messages, msg], t.tools, generation_prompt=False)
        opening = renderer.render(t.messages, t.tools, generation_prompt=True)
        body = full[len(opening):len(full) - len(closing)] if full.startswith(opening) and full.endswith(closing) else None
        if body is None or body != t.text:
            noncanonical.append(k)
    last_stop = renderer.decode(last.completion_ids[-1:]) if last.finish_reason == "stop" else None
    tail = _stop_stripped(renderer.closing(last.messages, last.tools), last_stop)
    rendered = renderer.render(final, last.tools, generation_prompt=False)
    matches = renderer.decode(prompt_ids + completion) + tail == rendered
    if strict_roundtrip and not matches:
        raise TemplateDriftError(f"the sampled text of turns {noncanonical} is not what the template renders for "
                                 "the parsed messages (strict round-trip requested)")
    return TrajectorySample(prompt_ids=prompt_ids, completion_ids=completion, logprobs=logprobs, env_mask=mask,
                            turns=len(turns), finish_reasons=[t.finish_reason for t in turns],
                            noncanonical_turns=noncanonical, rendering_matches=matches)


# --------------------------------------------------------------------------------------------------
# The backend
# --------------------------------------------------------------------------------------------------

def _returned_cache(out, cache):
    """The cache to pass next: the one the model returned (a DynamicCache is updated in place and returned)."""
    for key in ("cache", "past_key_values"):  # transformers 5 renamed the output field; keys() avoids BC warnings
        if key in out.keys() and out[key] is not None:  # noqa: SIM118 - `in out` maps old names, warning
            return out[key]
    return cache


def stop_ids_for(tokenizer, generation_config=None) -> set[int]:
    """End-of-turn token ids: the model's generation config's eos ids and the tokenizer's eos id."""
    ids: set[int] = set()
    for source in (getattr(generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(source, int):
            ids.add(source)
        elif source:
            ids.update(int(x) for x in source)
    if not ids:
        raise ValueError("neither the model's generation config nor the tokenizer names an end-of-turn token")
    return ids


class LocalSampler:
    """Token-in/token-out sampling from a causal LM in this process (batch 1, KV cache), returning the sampled
    ids, the logprob of each under the tempered policy distribution, and the finish reason. Shared by `HFPolicy`
    (the CPU training path) and the CPU token server of the verl adapter (`verl_adapter.CPUTokenServer`)."""

    def __init__(self, model, stop_ids: set[int]):
        self.model = model
        self.stop_ids = set(stop_ids)
        self._cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def generate(self, prompt_ids: list[int], max_new: int, *, temperature: float | None, top_p: float | None,
                 top_k: int | None, generator, logits_processor: LogitsProcessor | None = None
                 ) -> tuple[list[int], list[float], str]:
        """Sample up to `max_new` tokens; (ids, logprobs, "stop" | "length")."""
        import torch  # lazy: train/cpu-model extra

        temperature = 1.0 if temperature is None else float(temperature)
        top_p = 1.0 if top_p is None else float(top_p)
        top_k = top_k if top_k is not None and top_k > 0 else None
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        ids: list[int] = []
        lps: list[float] = []
        finish = "length"
        try:
            with torch.no_grad():
                cache = self._new_cache()
                out = self.model(input_ids=torch.tensor([prompt_ids], device=device), use_cache=True,
                                 **{self._cache_kw: cache})
                cache = _returned_cache(out, cache)
                scale = temperature if temperature > 0 else 1.0
                forced_rest = getattr(logits_processor, "forced_rest", None)
                while len(ids) < max(0, max_new):
                    logits = out.logits[0, -1].float()
                    logp = torch.log_softmax(logits / scale, dim=-1)
                    scores = logits_processor(list(ids), logits.clone()) if logits_processor else logits
                    token = self._sample(scores, temperature, top_p, top_k, generator)
                    ids.append(token)
                    lps.append(float(logp[token]))
                    if token in self.stop_ids:
                        finish = "stop"
                        break
                    rest = list(forced_rest(list(ids)) or [])[: max_new - len(ids)] if forced_rest else []
                    feed = [token, *rest]
                    out = self.model(input_ids=torch.tensor([feed], device=device), use_cache=True,
                                     **{self._cache_kw: cache})
                    cache = _returned_cache(out, cache)
                    if rest:
                        # a fully determined (forced) continuation: one forward pass gives the logits every one
                        # of its tokens is sampled from; same logprobs as token by token, up to float rounding
                        rest_lp = torch.log_softmax(out.logits[0, :len(rest)].float() / scale, dim=-1)
                        for j, t in enumerate(rest):
                            ids.append(t)
                            lps.append(float(rest_lp[j, t]))
                            if t in self.stop_ids:
                                finish = "stop"
                                break
                        if finish == "stop":
                            break
        finally:
            self.model.train(was_training)
        return ids, lps, finish

    def _new_cache(self):
        try:
            from transformers import DynamicCache  # lazy: train/cpu-model extra

            return DynamicCache(config=self.model.config)
        except (ImportError, TypeError):
            return None

    @staticmethod
    def _sample(scores, temperature: float, top_p: float, top_k: int | None, generator) -> int:
        import torch  # lazy: train/cpu-model extra

        if temperature <= 0:
            return int(torch.argmax(scores))
        scores = scores / temperature
        if top_k is not None and top_k < scores.numel():
            kth = torch.topk(scores, top_k).values[-1]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        if top_p < 1.0:
            sorted_p, order = torch.sort(probs, descending=True)
            drop = torch.cumsum(sorted_p, 0) - sorted_p >= top_p   # keep the smallest prefix reaching top_p
            sorted_p[drop] = 0.0
            probs = torch.zeros_like(probs).scatter(0, order, sorted_p)
        return int(torch.multinomial(probs.cpu(), 1, generator=generator))


class TokenPolicy(ChatModel):
    """A token-in/token-out chat model behind the `ChatModel` interface, recording every turn for RL.

    Everything but the sampling itself: rendering with a prefix-preserving template, continuing one token
    sequence across turns (sampled ids verbatim, never re-tokenized), the per-turn records and the
    trajectory-level sample. Subclasses implement `_generate(prompt_ids, max_new) -> (ids, logprobs, finish)`:
    `HFPolicy` samples from a model in this process; the verl adapter's `ServerPolicy` asks a rollout server
    (vLLM/SGLang, or the CPU token server) through verl's `LLMServerClient.generate`.

    sampling: temperature/top_p/top_k/max_tokens/seed (`None` = the backend's default: 1.0 / 1.0 / off /
        up to the context window / a random seed); `begin_episode(seed)` reseeds, so a seeded episode is
        reproducible and a GRPO group differs.
    logits_processor: optional constrained decoding, applied to the logits sampled from (never to the recorded
        logprobs); only backends that sample in this process can honour it.
    Turn records accumulate until `begin_episode()`; `assemble_sample()` builds the trajectory-level sample.
    """

    tool_mode = "tools"

    def __init__(self, tokenizer, *, stop_ids: set[int], sampling: SamplingConfig | None = None,
                 tools: list[dict[str, Any]] | None = None, chat_template: str | None = None,
                 context_window: int | None = None, logits_processor: LogitsProcessor | None = None,
                 name: str = "token-policy"):
        self.tokenizer = tokenizer
        self.sampling = sampling or SamplingConfig.rl_rollout()
        self.tools = tools if tools is not None else [BASH_TOOL]
        if chat_template is None:
            chat_template, self.template_source = choose_chat_template(tokenizer)
        else:
            self.template_source = "explicit"
        self.renderer = ChatRenderer(tokenizer, chat_template)
        self.context_window = context_window
        self.reply_tokens = self.sampling.max_tokens
        self.logits_processor = logits_processor
        self.name = name
        self.stop_ids = set(stop_ids)
        self._episode = 0
        self.episode_seed: int | None = self.sampling.seed
        self.turns: list[TurnRecord] = []

    # -- episodes --------------------------------------------------------------------------------
    def begin_episode(self, seed: int | None = None) -> None:
        """Forget the previous episode's turns; reseed when `seed` is given."""
        self.turns = []
        self._episode += 1
        if seed is not None:
            self.episode_seed = int(seed)
            self._reseed(int(seed))

    def _reseed(self, seed: int) -> None:
        """Hook: a backend with its own random generator reseeds it here."""

    def assemble_sample(self, turns: list[TurnRecord] | None = None, *, strict_roundtrip: bool = False
                        ) -> TrajectorySample:
        return assemble_sample(self.turns if turns is None else turns, self.renderer,
                               strict_roundtrip=strict_roundtrip)

    # -- ChatModel -----------------------------------------------------------------------------
    def query(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None) -> ModelResponse:
        started = time.monotonic()
        tools = tools if tools is not None else self.tools
        prev = self.turns[-1] if self.turns else None
        if prev is not None and self._continues(prev, messages, tools):
            prompt_ids, env_ids = self._continued_prompt(prev, messages, tools)
            continues = True
        else:
            prompt_ids = self.renderer.encode(self.renderer.render(messages, tools, generation_prompt=True))
            env_ids, continues = [], False
        window = self.context_window
        if window is not None and len(prompt_ids) >= window:
            raise ContextWindowExceeded(f"the prompt has {len(prompt_ids)} tokens; the context window is {window}")
        budget = self.sampling.max_tokens if self.sampling.max_tokens is not None else (window or 4096)
        if window is not None:
            budget = min(budget, window - len(prompt_ids))
        t_gen = time.monotonic()
        completion, logprobs, finish = self._generate(prompt_ids, budget)
        generate_s = time.monotonic() - t_gen
        body = completion[:-1] if finish == "stop" else completion
        text = self.renderer.decode(body)
        record = TurnRecord(index=len(self.turns), prompt_ids=prompt_ids, completion_ids=completion,
                            logprobs=logprobs, env_ids=env_ids, continues=continues, finish_reason=finish,
                            messages=list(messages), tools=tools, text=text, generate_s=generate_s)
        self.turns.append(record)
        content, reasoning, tool_calls = parse_completion(text)
        usage = {"prompt_tokens": len(prompt_ids), "completion_tokens": len(completion)}
        try:
            response = build_response(content, tool_calls, tool_mode=self.tool_mode, usage=usage,
                                      latency_s=time.monotonic() - started, finish_reason=finish,
                                      reasoning=reasoning, model=self.name, turn_tag=f"{self._episode}_{record.index}")
        except FormatError as exc:
            record.assistant_message = exc.raw_message
            record.history_message = exc.message
            record.format_error = exc.error
            raise
        record.assistant_message = response.message
        return response

    def _generate(self, prompt_ids: list[int], max_new: int) -> tuple[list[int], list[float], str]:
        raise NotImplementedError

    def serialize(self) -> dict[str, Any]:
        return {"backend": type(self).__name__, "model": self.name, "sampling": self.sampling.to_dict(),
                "tool_mode": self.tool_mode, "chat_template_sha256": self.renderer.digest(),
                "chat_template_source": self.template_source, "context_window": self.context_window,
                "logits_processor": None if self.logits_processor is None else repr(self.logits_processor)}

    # -- internals -----------------------------------------------------------------------------
    def _continues(self, prev: TurnRecord, messages: list[dict[str, Any]], tools) -> bool:
        """Does `messages` extend the conversation of `prev` by prev's own assistant message plus new ones?"""
        n = len(prev.messages)
        if tools != prev.tools or len(messages) <= n + 1:
            return False
        if any(a is not b and a != b for a, b in zip(messages[:n], prev.messages)):
            return False
        said = messages[n]
        return any(m is not None and (said is m or said == m) for m in (prev.assistant_message, prev.history_message))

    def _continued_prompt(self, prev: TurnRecord, messages: list[dict[str, Any]], tools) -> tuple[list[int], list[int]]:
        """prev prompt + prev sampled ids + the template's tokens for what came after the assistant turn."""
        n = len(prev.messages)
        head = self.renderer.render(messages[:n + 1], tools, generation_prompt=False)
        full = self.renderer.render(messages, tools, generation_prompt=True)
        if not full.startswith(head):
            raise TemplateDriftError(
                f"appending {[m.get('role') for m in messages[n + 1:]]} messages changes how the earlier conversation "
                "renders under this chat template (not prefix-preserving); use a prefix-preserving template")
        closing = self.renderer.closing(messages[:n], tools)
        if not head.endswith(closing):
            raise TemplateDriftError(f"the assistant turn does not end with the template's closing {closing!r}")
        stop_text = self.renderer.decode(prev.completion_ids[-1:]) if prev.finish_reason == "stop" else None
        env_ids = self.renderer.encode(_stop_stripped(closing, stop_text) + full[len(head):])
        return prev.prompt_ids + prev.completion_ids + env_ids, env_ids


class HFPolicy(TokenPolicy):
    """A causal LM in this process as a `TokenPolicy` (the CPU training path; see `TokenPolicy`).

    The private generator is seeded once from `sampling.seed` and again by `begin_episode(seed)`. A logits
    processor that also has `forced_rest(ids) -> list[int] | None` (the tokens it will force next, all
    determined) has that continuation scored in one forward pass instead of token by token.
    """

    def __init__(self, model, tokenizer, *, sampling: SamplingConfig | None = None,
                 tools: list[dict[str, Any]] | None = None, chat_template: str | None = None,
                 context_window: int | None = None, logits_processor: LogitsProcessor | None = None,
                 name: str | None = None):
        import torch  # lazy: train/cpu-model extra

        config = getattr(model, "config", None)
        super().__init__(tokenizer, stop_ids=stop_ids_for(tokenizer, getattr(model, "generation_config", None)),
                         sampling=sampling, tools=tools, chat_template=chat_template,
                         context_window=context_window or getattr(config, "max_position_embeddings", None),
                         logits_processor=logits_processor,
                         name=name or getattr(config, "_name_or_path", None) or type(model).__name__)
        self.model = model
        self._sampler = LocalSampler(model, self.stop_ids)
        self._generator = torch.Generator(device="cpu")
        if self.sampling.seed is not None:
            self._generator.manual_seed(int(self.sampling.seed))
        else:
            self._generator.seed()

    def _reseed(self, seed: int) -> None:
        self._generator.manual_seed(seed)

    def serialize(self) -> dict[str, Any]:
        params = sum(p.numel() for p in self.model.parameters())
        return {**super().serialize(), "backend": "hf-inprocess", "architecture": type(self.model).__name__,
                "parameters": params, "device": str(next(self.model.parameters()).device)}

    def _generate(self, prompt_ids: list[int], max_new: int) -> tuple[list[int], list[float], str]:
        s = self.sampling
        return self._sampler.generate(prompt_ids, max_new, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k,
                                      generator=self._generator, logits_processor=self.logits_processor)
