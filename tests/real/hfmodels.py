"""Tiny HF-format Llama models for the real vLLM tier, written at test time.

The same recipe as the llama.cpp tier's GGUF files (:mod:`tinymodels`: its vocabulary
trainer, weights, truncated draft and noisy draft, shared, not copied), written as
``transformers`` checkpoints: ``LlamaConfig`` + ``save_pretrained`` and a
``PreTrainedTokenizerFast`` (BOS added by a TemplateProcessing post-processor, the ChatML
template). Writing needs torch and transformers, which only the vLLM venv has
(``ci/build-vllm.sh``): :func:`ensure_hf_models` runs this file as a script with that python
when the cache lacks the set. Cached outside the checkout, keyed by :data:`HF_VERSION` and
the shape (whose key carries tinymodels' generator version).

    usage: VLLM_PYTHON tests/real/hfmodels.py [ROOT]     (prints target, draft, noisy dirs)
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__:
    from . import tinymodels as tm
else:  # run as a script by the vLLM venv's python
    sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "src"),
                    str(Path(__file__).resolve().parent)]
    import tinymodels as tm  # type: ignore[no-redef]

# Bump when what is written changes (names, config, tokenizer files): old caches are ignored.
HF_VERSION = 1
READY = ".specperf-ready"
# GGUF tensor names (tinymodels) → HF Llama names. Q/K stay unpermuted: the weights are
# random, so the HF model is simply another random model of the same recipe.
_BLOCK = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
          "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
          "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
          "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
_TOP = {"token_embd.weight": "model.embed_tokens.weight",
        "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}


@dataclass(frozen=True)
class HFModelSet:
    """Directories of one generated set."""

    target: Path
    draft: Path
    noisy: Path


def hf_name(gguf_name: str) -> str:
    """The HF Llama state-dict name of a tinymodels (GGUF) tensor name."""
    if gguf_name in _TOP:
        return _TOP[gguf_name]
    _, layer, part, _ = gguf_name.split(".")
    return f"model.layers.{layer}.{_BLOCK[part]}.weight"


def folder_of(shape: tm.Shape | None = None, root: Path | None = None) -> Path:
    shape = shape or tm.Shape()
    return (root or tm.cache_root()) / f"hf{HF_VERSION}-{shape.key()}"


def models_in(folder: Path) -> HFModelSet:
    return HFModelSet(folder / "target", folder / "draft", folder / "noisy")


def ensure_hf_models(python: Path, shape: tm.Shape | None = None,
                     root: Path | None = None) -> HFModelSet:
    """The cached set, written first by ``python`` (the vLLM venv's) when missing."""
    folder = folder_of(shape, root)
    if not (folder / READY).is_file():
        argv = [str(python), str(Path(__file__).resolve())]
        if root is not None:
            argv.append(str(root))
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0 or not (folder / READY).is_file():
            raise RuntimeError(f"writing the HF models failed ({' '.join(argv)}, exit "
                               f"{done.returncode}): {done.stderr.strip()[-1500:]}")
    return models_in(folder)


def _write(out: Path, shape: tm.Shape, n_layer: int, weights: dict[str, Any], tok: Any,
           bos: int, eos: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    config = LlamaConfig(
        vocab_size=weights["token_embd.weight"].shape[0], hidden_size=shape.n_embd,
        intermediate_size=shape.n_ff, num_hidden_layers=n_layer,
        num_attention_heads=shape.n_head, num_key_value_heads=shape.n_head,
        max_position_embeddings=shape.n_ctx, rms_norm_eps=1e-5, rope_theta=10000.0,
        bos_token_id=bos, eos_token_id=eos, tie_word_embeddings=False,
        torch_dtype="float32")
    model = LlamaForCausalLM(config)
    state = {hf_name(k): torch.from_numpy(v.astype("float32")) for k, v in weights.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if "rotary" not in m]
    if missing or unexpected:
        raise RuntimeError(f"state dict mismatch: missing {missing}, unexpected {unexpected}")
    model.save_pretrained(out, safe_serialization=True)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>",
                                   eos_token="<|eos|>", chat_template=tm.CHAT_TEMPLATE)
    fast.save_pretrained(out)


def write_set(shape: tm.Shape | None = None, root: Path | None = None) -> HFModelSet:
    """Generate target, draft and noisy draft (a few seconds), atomically per set."""
    import shutil

    from tokenizers import decoders, processors

    shape = shape or tm.Shape()
    folder = folder_of(shape, root)
    models = models_in(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tok = tm.train_tokenizer(shape.n_vocab)
    vocab = json.loads(tok.to_str())["model"]["vocab"]
    bos, eos = vocab["<|bos|>"], vocab["<|eos|>"]
    tok.post_processor = processors.TemplateProcessing(
        single="<|bos|> $A", pair="<|bos|> $A <|bos|> $B", special_tokens=[("<|bos|>", bos)])
    tok.decoder = decoders.ByteLevel()
    weights = tm.target_weights(shape, tok.get_vocab_size())
    draft = tm.truncated(weights, tm.DRAFT_LAYERS)
    _write(tmp / "target", shape, shape.n_layer, weights, tok, bos, eos)
    _write(tmp / "draft", shape, tm.DRAFT_LAYERS, draft, tok, bos, eos)
    # as small as the good draft, so a swap changes acceptance and not the cost of drafting
    _write(tmp / "noisy", shape, tm.DRAFT_LAYERS, tm.noisy(draft, tm.NOISY_SIGMA, shape.seed + 1),
           tok, bos, eos)
    (tmp / READY).write_text(json.dumps({"hf_version": HF_VERSION, "shape": shape.key()}))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return models


if __name__ == "__main__":
    made = write_set(root=Path(sys.argv[1]) if len(sys.argv) > 1 else None)
    print(made.target, made.draft, made.noisy, sep="\n")
