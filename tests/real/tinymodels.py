"""Tiny Llama-architecture GGUF models for the real-server tier, written at test time.

A target and drafts with known acceptance, made from random weights in seconds with numpy,
the ``gguf`` writer and a byte-level BPE vocabulary trained with ``tokenizers`` on the
suite's own text classes (so prompts tokenize the way they will be measured). Nothing here
is committed: :func:`ensure_models` caches the files outside the checkout, keyed by
:data:`GENERATOR_VERSION` and the shape, so a change to either writes new files.

Why the weights look the way they do: the output matrix is scaled
so the logits are peaky (greedy decoding is then decisive, not a coin toss between near
ties), and the blocks after the first two are scaled down so a draft made of the target's
first two blocks predicts it well. Drafts:

- ``draft``: the target's embeddings, output and first two blocks (high acceptance);
- ``noisy``: the same two blocks with Gaussian noise of ``NOISY_SIGMA`` times each matrix's
  standard deviation (acceptance collapses at the same drafting cost: the tier's
  acceptance regression).

Run as a script to write a set by hand: ``python tests/real/tinymodels.py DIR``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Bump when the weights, the vocabulary or the metadata written change: old caches are ignored.
GENERATOR_VERSION = 3
SPECIALS = ("<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
NOISY_SIGMA = 0.3
DRAFT_LAYERS = 2
LATE_SCALE = 0.03


@dataclass(frozen=True)
class Shape:
    """Dimensions of the target. Small enough that CI is quick, large enough that the
    attention over a 2000-token context costs as much as the weights (step time rises)."""

    n_embd: int = 256
    n_layer: int = 4
    n_head: int = 4
    n_ff: int = 768
    n_vocab: int = 2048
    n_ctx: int = 8192
    seed: int = 1234

    def key(self) -> str:
        blob = json.dumps({"v": GENERATOR_VERSION, **asdict(self)}, sort_keys=True)
        return f"v{GENERATOR_VERSION}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class Vocab:
    """A GGUF ``gpt2`` tokenizer: byte-level tokens, merges, types and special ids."""

    tokens: list[str]
    merges: list[str]
    types: list[int]
    bos: int
    eos: int


def train_tokenizer(size: int) -> Any:
    """A byte-level BPE ``tokenizers.Tokenizer`` trained on the suite's own text classes
    (shared with the vLLM tier's HF-format models, tests/real/hfmodels.py)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from specperf.plan.workload import generate, load_text_classes

    corpus = [generate("prose", seed, 20000) for seed in range(1, 4)]
    corpus += [generate("code", seed, 20000) for seed in range(1, 3)]
    corpus += [c.body(2000) + c.suffix for c in load_text_classes().values()]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=size, special_tokens=list(SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    return tok


def train_vocab(size: int) -> Vocab:
    """A byte-level BPE vocabulary trained on the suite's own text classes."""
    model = json.loads(train_tokenizer(size).to_str())["model"]
    by_id = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in by_id]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    control, normal = 3, 1  # llama.cpp's token types
    types = [control if t in SPECIALS else normal for t in tokens]
    return Vocab(tokens, merges, types, tokens.index("<|bos|>"), tokens.index("<|eos|>"))


def target_weights(shape: Shape, vocab_size: int) -> dict[str, np.ndarray]:
    """Random Llama weights, numpy (rows, cols) = (out, in) as the gguf writer expects."""
    rng = np.random.default_rng(shape.seed)
    e, f = shape.n_embd, shape.n_ff

    def mat(rows: int, cols: int, scale: float = 1.0) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)).astype(np.float16)

    w: dict[str, np.ndarray] = {
        # small embeddings: the blocks, which mix in the context, outweigh the current
        # token's own identity in the residual stream, so greedy decoding on prose does not
        # fall into loops (median 8-gram repetition 0.22 → 0.00 over 25 prose prompts)
        "token_embd.weight": (0.1 * rng.standard_normal((vocab_size, e))).astype(np.float16),
        "output_norm.weight": np.ones(e, dtype=np.float32),
        # peaky logits: greedy decoding is decisive, as a trained model's is
        "output.weight": mat(vocab_size, e, 4.0),
    }
    for i in range(shape.n_layer):
        # the first blocks dominate, so the draft (those blocks) agrees with the target on
        # most tokens of any prompt: acceptance high and alike from prompt to prompt
        late = LATE_SCALE if i >= DRAFT_LAYERS else 1.0
        p = f"blk.{i}."
        w[p + "attn_norm.weight"] = np.ones(e, dtype=np.float32)
        w[p + "ffn_norm.weight"] = np.ones(e, dtype=np.float32)
        for name in ("attn_q", "attn_k", "attn_v"):
            w[p + name + ".weight"] = mat(e, e)
        w[p + "attn_output.weight"] = mat(e, e, late)
        w[p + "ffn_gate.weight"] = mat(f, e)
        w[p + "ffn_up.weight"] = mat(f, e)
        w[p + "ffn_down.weight"] = mat(e, f, late)
    return w


def truncated(weights: dict[str, np.ndarray], layers: int) -> dict[str, np.ndarray]:
    """The target's embeddings, output and first ``layers`` blocks."""
    keep = {f"blk.{i}." for i in range(layers)}
    return {k: v for k, v in weights.items()
            if not k.startswith("blk.") or k[:k.index(".", 4) + 1] in keep}


def noisy(weights: dict[str, np.ndarray], sigma: float, seed: int) -> dict[str, np.ndarray]:
    """Every matrix plus Gaussian noise of ``sigma`` times its own standard deviation."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, v in weights.items():
        if v.ndim == 2:
            std = float(np.std(v.astype(np.float32)))
            v = (v.astype(np.float32) + rng.standard_normal(v.shape) * sigma * std
                 ).astype(v.dtype)
        out[k] = v
    return out


def write_gguf(path: Path, name: str, shape: Shape, n_layer: int, vocab: Vocab,
               weights: dict[str, np.ndarray]) -> None:
    """One Llama GGUF file with the vocabulary and ChatML template (written atomically)."""
    import gguf

    tmp = path.with_suffix(".tmp")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name(name)
    w.add_context_length(shape.n_ctx)
    w.add_embedding_length(shape.n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(shape.n_ff)
    w.add_head_count(shape.n_head)
    w.add_head_count_kv(shape.n_head)
    w.add_rope_dimension_count(shape.n_embd // shape.n_head)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(vocab.tokens)
    w.add_token_types(vocab.types)
    w.add_token_merges(vocab.merges)
    w.add_bos_token_id(vocab.bos)
    w.add_eos_token_id(vocab.eos)
    w.add_add_bos_token(True)
    w.add_chat_template(CHAT_TEMPLATE)
    for tensor_name, data in weights.items():
        w.add_tensor(tensor_name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)


@dataclass(frozen=True)
class ModelSet:
    """Paths of one generated set."""

    target: Path
    draft: Path
    noisy: Path


def cache_root() -> Path:
    base = os.environ.get("SPECPERF_CACHE") or \
        os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                     "specperf")
    return Path(base) / "models"


def ensure_models(shape: Shape = Shape(), root: Path | None = None) -> ModelSet:
    """The cached set for ``shape``, generated first when missing (a few seconds)."""
    folder = (root or cache_root()) / shape.key()
    models = ModelSet(folder / "target.gguf", folder / "draft.gguf", folder / "noisy.gguf")
    if all(p.is_file() for p in (models.target, models.draft, models.noisy)):
        return models
    folder.mkdir(parents=True, exist_ok=True)
    vocab = train_vocab(shape.n_vocab)
    weights = target_weights(shape, len(vocab.tokens))
    write_gguf(models.target, "specperf-tiny-target", shape, shape.n_layer, vocab, weights)
    write_gguf(models.draft, "specperf-tiny-draft", shape, DRAFT_LAYERS, vocab,
               truncated(weights, DRAFT_LAYERS))
    # as small as the good draft, so a swap changes acceptance and not the cost of drafting
    write_gguf(models.noisy, "specperf-tiny-noisy", shape, DRAFT_LAYERS, vocab,
               noisy(truncated(weights, DRAFT_LAYERS), NOISY_SIGMA, shape.seed + 1))
    return models


if __name__ == "__main__":
    out = ensure_models(root=Path(sys.argv[1]) if len(sys.argv) > 1 else None)
    print(out.target, out.draft, out.noisy, sep="\n")
