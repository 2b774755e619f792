"""One configurable Transformer block, and the encoders built from it.

The toy models of chapters 1-4 and the pretrained BERT encoder of ``mha_lib.pretrained``
are the same classes. What differs is configuration (:class:`EncoderConfig`):

=====================  ==========================  ==================================
setting                toy models (typical)        BERT (Devlin et al. 2019)
=====================  ==========================  ==================================
``norm_first``         True  (pre-LN)              False (post-LN)
``activation``         ``"relu"`` or ``"gelu"``    ``"gelu"`` (exact, erf-based)
``positional``         ``"sinusoidal"``/learned    ``"learned"``
``type_vocab_size``    0 (no token types)          2 (sentence A / B)
``embedding_norm``     False                       True (LayerNorm + dropout)
``final_norm``         True (pre-LN needs it)      False
``layer_norm_eps``     1e-5                        1e-12
``is_causal``          False (chapter 6: True)     False
``d_ff``               256 (0 = attention-only)    3072 (MiniLM: 1536)
``cross_attention``    False (a decoder: True)     False
``patch_dim``          0 (token ids; images: > 0)  0
=====================  ==========================  ==================================

A decoder-only language model is ``is_causal=True``; an attention-only model (Elhage et al.
2021) is ``d_ff=0``; a decoder block of an encoder-decoder adds ``cross_attention=True``; a
Vision Transformer front-end (Dosovitskiy et al. 2021) is ``patch_dim=C*p*p`` with
``cls_token=True`` (and ``vocab_size=0``), fed by :func:`patchify`.

The files, read in this order (each imports only the ones above it, and the core):

* ``config.py``: :class:`EncoderConfig`;
* ``layers.py``: positions, :func:`patchify`, the MLP and the one :class:`TransformerBlock`;
* ``io.py``: saving and the one loading path (safetensors + JSON, never pickle): :func:`load`,
  :func:`read_weights`, :func:`build_checked`, :func:`read_json`;
* ``encoder.py``: :class:`Encoder` and the output records;
* ``classifier.py``: :class:`TokenClassifier`;
* ``encoder_decoder.py``: :class:`EncoderDecoder`;
* ``heads.py``: the head grid (``attention_layers``, ``kept_mask``, ``heads_to_mask``, ...), a
  model's heads as a (num_layers, H) table; ``tied.py``: :func:`tie_heads`,
  :func:`merge_tied_heads`.

A new model of a chapter is a configuration of these classes, never a new class.

Shapes: B batch, L sequence length, d_model model width, H heads of a layer (after
pruning, H_l may differ from layer to layer), d_ff MLP width, C classes.

Sources: Vaswani et al. 2017 (block, sinusoidal positions, cross-attention); Devlin et al.
2019 (BERT embeddings, post-LN, GELU); Dosovitskiy et al. 2021 (patches, [CLS]); Xiong et al. 2020 "On Layer Normalization in the
Transformer Architecture" (pre-LN); Michel et al. 2019 (``head_mask``, pruning).
"""
from __future__ import annotations

from .classifier import TokenClassifier
from .config import EncoderConfig
from .encoder import Encoder, EncoderOutput, TokenClassifierOutput
from .encoder_decoder import EncoderDecoder, EncoderDecoderOutput
from .heads import attention_layers, heads_to_mask, kept_mask, layer_head_masks, mask_to_heads, num_heads_grid
from .io import (CONFIG_NAME, CONFIG_SIZE_LIMITS, MAX_DERIVED_BUFFER_BYTES, MAX_JSON_BYTES, WEIGHTS_NAME, build_checked,
                 check_config_sizes, load, read_json, read_weights)
from .layers import MLP, TransformerBlock, patchify, sinusoidal_positions, unpatchify
from .tied import merge_tied_heads, tie_heads

__all__ = [
    "EncoderConfig",
    "EncoderOutput",
    "TokenClassifierOutput",
    "TransformerBlock",
    "Encoder",
    "TokenClassifier",
    "EncoderDecoder",
    "EncoderDecoderOutput",
    "sinusoidal_positions",
    "patchify",
    "unpatchify",
    "load",
    "CONFIG_NAME",
    "WEIGHTS_NAME",
]
