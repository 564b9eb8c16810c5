"""A tiny random-init Qwen3.5-MoE with the real Qwen3.5 chat template: the CPU stand-in for training tests.

Why this model: it is the paper's architecture class (`Qwen3_5MoeForCausalLM`: Gated-DeltaNet linear attention
plus one full-attention layer, a routed MoE with a shared expert), it builds in seconds with no download, and
its chat template is the real Qwen3.5 one (shipped inside the `trl` wheel), so prompts, `<tools>` sections and
the XML tool-call format are byte-for-byte what the 35B model sees. Its weights are random: it produces
garbage, which is exactly what a test of masks, logprobs and optimizer steps needs (not what an agent needs).

Recipe (verified on CPU, see `shared/reference/training-stack-notes.md` §3): byte-level BPE (vocab 2048) trained
on a fixed list of CPython stdlib files; hidden 64, 4 layers (3 linear + 1 full attention), 4 experts top-2,
head_dim 16, 2 linear key heads / 4 value heads: 455,592 parameters. Everything is derived from `seed` (and the
stdlib text of the running interpreter, whose digest is part of the cache key), so the same seed on the same
interpreter gives the same tokenizer and weights. Builds are atomic and locked, so parallel test processes can
share one cache directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import sysconfig
import tempfile
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

RECIPE_VERSION = 1
MANIFEST = "execcritic-tiny-model.json"

# Stdlib modules whose source trains the tokenizer: code-like text, stable names across CPython 3.10-3.13.
CORPUS_MODULES = (
    "argparse.py", "ast.py", "base64.py", "bisect.py", "calendar.py", "codecs.py", "collections/__init__.py",
    "configparser.py", "contextlib.py", "copy.py", "csv.py", "dataclasses.py", "datetime.py", "difflib.py",
    "dis.py", "enum.py", "filecmp.py", "fnmatch.py", "fractions.py", "functools.py", "getopt.py", "gettext.py",
    "glob.py", "gzip.py", "hashlib.py", "heapq.py", "hmac.py", "inspect.py", "json/__init__.py",
    "json/decoder.py", "json/encoder.py", "keyword.py", "linecache.py", "locale.py", "logging/__init__.py",
    "ntpath.py", "numbers.py", "operator.py", "optparse.py", "os.py", "pathlib.py", "pickle.py", "platform.py",
    "posixpath.py", "pprint.py", "queue.py", "random.py", "re/__init__.py", "shlex.py", "shutil.py",
    "socket.py", "statistics.py", "string.py", "subprocess.py", "tempfile.py", "textwrap.py", "threading.py",
    "tokenize.py", "traceback.py", "typing.py", "unittest/case.py", "uuid.py", "warnings.py", "zipfile/__init__.py",
)

# Control tokens (skipped by `decode(skip_special_tokens=True)`) and the Qwen tool/think markers, which the
# real Qwen tokenizers keep as single, non-special added tokens (so they survive decoding).
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
ADDED_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")


@dataclass(frozen=True)
class TinyRecipe:
    """Everything that determines the built model; its digest names the cache directory."""

    seed: int = 0
    vocab_size: int = 2048
    hidden_size: int = 64
    num_hidden_layers: int = 4
    layer_types: tuple[str, ...] = ("linear_attention", "linear_attention", "linear_attention", "full_attention")
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 16
    linear_num_key_heads: int = 2
    linear_num_value_heads: int = 4
    linear_key_head_dim: int = 16
    linear_value_head_dim: int = 16
    num_experts: int = 4
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 32
    shared_expert_intermediate_size: int = 32
    max_position_embeddings: int = 8192
    chat_template: str = "qwen3_5_nothink"   # name of the TRL-shipped template (`trl/chat_templates/*.jinja`)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["layer_types"] = list(self.layer_types)
        return d


def corpus_files() -> list[Path]:
    """The stdlib files of the running interpreter that exist (missing ones are skipped, and recorded)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    return [root / m for m in CORPUS_MODULES if (root / m).is_file()]


def corpus_digest(files: list[Path] | None = None) -> str:
    h = hashlib.sha256()
    for f in files if files is not None else corpus_files():
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def chat_template_text(name: str) -> str:
    """A chat template shipped in the TRL wheel, by file stem (e.g. `qwen3_5_nothink`)."""
    import trl.chat_template_utils as ctu  # lazy: train extra

    path = Path(ctu.__file__).parent / "chat_templates" / f"{name}.jinja"
    if not path.is_file():
        raise FileNotFoundError(f"TRL {_version('trl')} ships no chat template {name!r} ({path})")
    return path.read_text(encoding="utf-8")


def _version(pkg: str) -> str:

    try:
        return version(pkg)
    except PackageNotFoundError:
        return "absent"


def cache_key(recipe: TinyRecipe) -> str:
    """Digest of the recipe, the corpus text and the library versions that shape tokenizer and weights."""
    blob = json.dumps({"recipe": recipe.to_dict(), "recipe_version": RECIPE_VERSION, "corpus": corpus_digest(),
                       "template": hashlib.sha256(chat_template_text(recipe.chat_template).encode()).hexdigest(),
                       "torch": _version("torch"), "transformers": _version("transformers"),
                       "tokenizers": _version("tokenizers")}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def build_tokenizer(recipe: TinyRecipe):
    """Byte-level BPE trained on the stdlib corpus, wrapped as a fast tokenizer with the Qwen3.5 template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers  # lazy: train extra
    from transformers import PreTrainedTokenizerFast  # lazy: train/cpu-model extra

    files = corpus_files()
    texts = [f.read_text(encoding="utf-8", errors="replace") for f in files]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=recipe.vocab_size - len(ADDED_TOKENS), special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   padding_side="left", model_max_length=recipe.max_position_embeddings,
                                   chat_template=chat_template_text(recipe.chat_template))
    return fast, files


def build_model(recipe: TinyRecipe, tokenizer):
    """Random-init `Qwen3_5MoeForCausalLM`; the weights depend only on `recipe.seed` (a private torch RNG)."""
    import torch  # lazy: train/cpu-model extra
    from transformers import GenerationConfig  # lazy: train/cpu-model extra
    from transformers.models.qwen3_5_moe import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig  # lazy: train/cpu-model extra

    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen3_5MoeTextConfig(
        vocab_size=len(tokenizer), hidden_size=recipe.hidden_size, num_hidden_layers=recipe.num_hidden_layers,
        layer_types=list(recipe.layer_types), num_attention_heads=recipe.num_attention_heads,
        num_key_value_heads=recipe.num_key_value_heads, head_dim=recipe.head_dim,
        linear_num_key_heads=recipe.linear_num_key_heads, linear_num_value_heads=recipe.linear_num_value_heads,
        linear_key_head_dim=recipe.linear_key_head_dim, linear_value_head_dim=recipe.linear_value_head_dim,
        num_experts=recipe.num_experts, num_experts_per_tok=recipe.num_experts_per_tok,
        moe_intermediate_size=recipe.moe_intermediate_size,
        shared_expert_intermediate_size=recipe.shared_expert_intermediate_size,
        max_position_embeddings=recipe.max_position_embeddings, eos_token_id=eos, pad_token_id=pad,
        bos_token_id=None, tie_word_embeddings=False, **recipe.extra)
    # fork_rng: building must not disturb (or depend on) the caller's global RNG state
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(recipe.seed)
        model = Qwen3_5MoeForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=[eos, pad], pad_token_id=pad)
    return model


def build_tiny_model(dest: Path | str, recipe: TinyRecipe = TinyRecipe()) -> Path:
    """Build into `dest` (must not exist): tokenizer, safetensors weights, and a manifest of the recipe."""
    dest = Path(dest)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tokenizer, files = build_tokenizer(recipe)
    model = build_model(recipe, tokenizer)
    dest.mkdir(parents=True)
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    manifest = {
        "recipe": recipe.to_dict(), "recipe_version": RECIPE_VERSION, "cache_key": cache_key(recipe),
        "architecture": type(model).__name__, "parameters": sum(p.numel() for p in model.parameters()),
        "corpus": {"python": sys.version.split()[0], "files": [str(f) for f in files], "sha256": corpus_digest(files),
                   "missing": sorted(set(CORPUS_MODULES) - {str(f.relative_to(sysconfig.get_paths()["stdlib"]))
                                                            for f in files})},
        "versions": {p: _version(p) for p in ("torch", "transformers", "tokenizers", "trl")},
    }
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return dest


def default_cache_root() -> Path:
    from execcritic.agents.models.local_server import model_cache_root  # lazy: imports torch (cpu-model extra)

    return model_cache_root()


def ensure_tiny_model(cache_root: Path | str | None = None, recipe: TinyRecipe = TinyRecipe()) -> Path:
    """The cached model directory for `recipe`, building it once (under a file lock, atomically renamed)."""
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"tiny-qwen35moe-{cache_key(recipe)}"
    if (target / MANIFEST).is_file():
        return target
    with open(root / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / MANIFEST).is_file():
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=root))
        try:
            build_tiny_model(tmp / "m", recipe)
            if target.exists():  # a partial leftover without a manifest
                shutil.rmtree(target)
            os.replace(tmp / "m", target)
        finally:
            with contextlib.suppress(OSError):
                shutil.rmtree(tmp)
    return target


def load_tiny_model(path: Path | str):
    """(model, tokenizer) from a built directory, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: train/cpu-model extra

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path))
    return model, tokenizer
