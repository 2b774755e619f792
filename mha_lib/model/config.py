"""EncoderConfig: every model of the book is a configuration, never a new class.

See :mod:`mha_lib.model` for the table of settings (toy models vs BERT).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Mapping, Optional

import torch
import torch.nn.functional as F

from .. import checks
from ..efficient import block_sparse_layout, sliding_window_mask


_ACTIVATIONS = {
    "gelu": lambda x: F.gelu(x),  # exact, erf-based: BERT's "gelu"
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's "gelu_new"
    "relu": F.relu,
    "silu": F.silu,
}
_POSITIONALS = ("learned", "sinusoidal", "none")
#: The most blocks BigBird's pattern may cut ``max_len`` into; an encoder keeps the (n, n) block layout
#: (:meth:`EncoderConfig.attention_pattern`), 16 MiB at 4,096 blocks, drawn once (one torch.randperm per
#: row). BigBird itself (Zaheer et al. 2020) cuts 4,096 tokens into 64 blocks of 64.
MAX_PATTERN_BLOCKS = 4096


# ----------------------------------------------------------------------------- config
@dataclass
class EncoderConfig:
    """Everything that defines an :class:`Encoder`; JSON-able through ``to_dict``/``from_dict``.

    The fields cover the encoder of Vaswani et al. 2017 ("Attention Is All You Need"), BERT's
    variant (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for
    Language Understanding": post-LN, learned positions, token types, embedding LayerNorm)
    and the pre-LN placement of Xiong et al. 2020 ("On Layer Normalization in the Transformer
    Architecture"). Integer fields accept Python and numpy integers (stored as int); bools,
    floats and strings are rejected rather than converted.

    Raises:
        ValueError: on any out-of-range or wrongly typed field, naming the field and its
            value (e.g. ``d_model=10`` with ``num_heads=3``, an unknown ``activation``, a
            pruned head index outside ``range(num_heads)`` or not an integer, ``pad_token_id``
            outside [0, vocab_size), a non-bool ``norm_first``, a ``layer_norm_eps`` that is
            not finite and > 0, a ``dropout`` that is not a number in [0, 1), two sparse patterns at once,
            sinks without a window, an ``attention_window``, ``attention_sinks`` or ``sparse_block`` larger
            than ``max_len`` or blocks that cut ``max_len`` into more than :data:`MAX_PATTERN_BLOCKS` (checked
            before anything is built), ``kv_rank`` without an even ``rope_dim`` (or with ``is_causal=False``,
            ``num_kv_heads`` or pruned heads)).
    """

    vocab_size: int  # number of token ids; input_ids must lie in [0, vocab_size); 0 with a patch front-end
    d_model: int  # width of the residual stream
    num_heads: int  # query heads per layer before pruning; d_model % num_heads == 0
    num_layers: int  # number of TransformerBlocks
    d_ff: int  # hidden width of each block's MLP (4 * d_model is usual); 0 = attention-only (no MLP)
    max_len: int  # longest sequence; size of the learned position table
    num_kv_heads: Optional[int] = None  # GQA/MQA key/value heads; None = num_heads (plain MHA)
    dropout: float = 0.0  # dropout on embeddings and on each residual branch
    attention_dropout: Optional[float] = None  # dropout on attention weights; None = `dropout`
    norm_first: bool = True  # True: pre-LN (x + f(LN(x))); False: post-LN (LN(x + f(x))), as BERT
    activation: str = "gelu"  # MLP nonlinearity: "gelu" (exact erf), "gelu_tanh", "relu", "silu"
    layer_norm_eps: float = 1e-5  # LayerNorm epsilon (BERT: 1e-12)
    positional: str = "sinusoidal"  # "learned" table, fixed "sinusoidal" (Vaswani et al.), or "none"
    type_vocab_size: int = 0  # token-type (segment) embeddings; 0 = none, BERT: 2
    embedding_norm: bool = False  # LayerNorm after summing embeddings, as BERT
    final_norm: bool = True  # LayerNorm after the last block (pre-LN stacks need it; BERT: False)
    pad_token_id: Optional[int] = 0  # id of the padding token (its embedding gets no gradient)
    bias: bool = True  # biases in attention projections
    pruned_heads: dict = field(default_factory=dict)  # {layer: [original head ids]} removed by pruning
    is_causal: bool = False  # default of forward's is_causal: position i sees only j <= i (a decoder)
    cross_attention: bool = False  # each block also attends to a `memory` sequence (encoder-decoder)
    patch_dim: int = 0  # 0: inputs are token ids; > 0: (B, N, patch_dim) float vectors (image patches)
    cls_token: bool = False  # prepend a learned [CLS] vector to patch inputs (ViT); patch front-end only
    attention_window: int = 0  # 0: every key; w >= 1: a sliding window of w keys (Mistral; Longformer two-sided)
    attention_sinks: int = 0  # with a window: the first keys every query also sees (StreamingLLM's sinks)
    sparse_block: int = 0  # > 0: BigBird's block-sparse pattern on blocks of this many tokens (band, global, random)
    kv_rank: int = 0  # > 0: multi-head latent attention (DeepSeek-V2), caching a latent of this width; causal only
    rope_dim: int = 0  # MLA's decoupled RoPE key width (even, >= 2); only with kv_rank

    def __post_init__(self):
        for name in ("num_layers", "max_len"):
            setattr(self, name, checks.positive_int(getattr(self, name), f"EncoderConfig.{name}"))
        for name in ("vocab_size", "d_ff", "patch_dim"):
            setattr(self, name, checks.nonnegative_int(getattr(self, name), f"EncoderConfig.{name}"))
        if self.patch_dim == 0 and self.vocab_size == 0:
            raise ValueError("EncoderConfig.vocab_size=0: a token front-end needs vocab_size >= 1")
        if self.patch_dim > 0 and self.vocab_size != 0:
            raise ValueError(
                f"EncoderConfig.vocab_size={self.vocab_size} with patch_dim={self.patch_dim}: a patch front-end "
                f"has no vocabulary, set vocab_size=0"
            )
        try:
            self.d_model, self.num_heads, kv, _ = checks.head_sizes(self.d_model, self.num_heads, self.num_kv_heads)
        except ValueError as err:
            raise ValueError(f"EncoderConfig: {err}") from None
        self.num_kv_heads = None if self.num_kv_heads is None else kv
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if value is not None or name == "dropout":
                setattr(self, name, checks.probability(value, f"EncoderConfig.{name}"))
        for name in ("norm_first", "embedding_norm", "final_norm", "bias", "is_causal", "cross_attention",
                     "cls_token"):
            setattr(self, name, checks.flag(getattr(self, name), f"EncoderConfig.{name}"))
        if not isinstance(self.activation, str) or self.activation not in _ACTIVATIONS:
            raise ValueError(
                f"EncoderConfig.activation={self.activation!r} is not one of {sorted(_ACTIVATIONS)}"
            )
        if not isinstance(self.positional, str) or self.positional not in _POSITIONALS:
            raise ValueError(
                f"EncoderConfig.positional={self.positional!r} is not one of {list(_POSITIONALS)}"
            )
        self.layer_norm_eps = checks.finite_real(self.layer_norm_eps, "EncoderConfig.layer_norm_eps", positive=True)
        self.type_vocab_size = checks.nonnegative_int(self.type_vocab_size, "EncoderConfig.type_vocab_size")
        if self.patch_dim > 0 and (self.type_vocab_size or self.pad_token_id is not None):
            raise ValueError(
                f"EncoderConfig: a patch front-end (patch_dim={self.patch_dim}) takes no token types or padding "
                f"id; got type_vocab_size={self.type_vocab_size}, pad_token_id={self.pad_token_id!r}"
            )
        if self.cls_token and self.patch_dim == 0:
            raise ValueError("EncoderConfig.cls_token=True needs a patch front-end (patch_dim > 0); token inputs "
                             "carry their own [CLS] id")
        if self.pad_token_id is not None:
            pad = checks.as_int(self.pad_token_id, "EncoderConfig.pad_token_id")
            if not 0 <= pad < self.vocab_size:
                raise ValueError(
                    f"EncoderConfig.pad_token_id={pad!r} is outside [0, vocab_size={self.vocab_size})"
                )
            self.pad_token_id = pad
        self.pruned_heads = self._normalise_pruned(self.pruned_heads)
        self._check_cheaper_attention()

    def _check_cheaper_attention(self) -> None:
        """The sparse patterns and MLA (chapter 9): sizes in range, and only combinations that mean something."""
        for name in ("attention_window", "attention_sinks", "sparse_block", "kv_rank", "rope_dim"):
            setattr(self, name, checks.nonnegative_int(getattr(self, name), f"EncoderConfig.{name}"))
        if self.attention_window and self.sparse_block:
            raise ValueError(f"EncoderConfig: attention_window={self.attention_window} and sparse_block="
                             f"{self.sparse_block} are two patterns; choose one")
        if self.attention_sinks and not self.attention_window:
            raise ValueError(f"EncoderConfig.attention_sinks={self.attention_sinks} needs an attention_window")
        for name in ("attention_window", "attention_sinks", "sparse_block"):  # sizes against max_len, first
            if getattr(self, name) > self.max_len:
                raise ValueError(f"EncoderConfig.{name}={getattr(self, name)} is more than max_len={self.max_len}: "
                                 f"a pattern is cut from the max_len positions (0 turns it off)")
        if self.sparse_block and -(-self.max_len // self.sparse_block) > MAX_PATTERN_BLOCKS:
            raise ValueError(f"EncoderConfig.sparse_block={self.sparse_block} cuts max_len={self.max_len} into "
                             f"{-(-self.max_len // self.sparse_block):,} blocks, more than MAX_PATTERN_BLOCKS="
                             f"{MAX_PATTERN_BLOCKS:,} (the layout an encoder keeps is blocks x blocks); use blocks of "
                             f"at least {-(-self.max_len // MAX_PATTERN_BLOCKS)}")
        if bool(self.kv_rank) != bool(self.rope_dim) or self.rope_dim % 2:
            raise ValueError(f"EncoderConfig: multi-head latent attention needs kv_rank >= 1 and an even rope_dim "
                             f">= 2 together; got kv_rank={self.kv_rank}, rope_dim={self.rope_dim}")
        if self.kv_rank and (not self.is_causal or self.num_kv_heads is not None or self.pruned_heads):
            raise ValueError(f"EncoderConfig.kv_rank={self.kv_rank}: multi-head latent attention here is causal, "
                             f"with no num_kv_heads and no pruned heads; got is_causal={self.is_causal}, "
                             f"num_kv_heads={self.num_kv_heads}, pruned_heads={self.pruned_heads}")

    def attention_pattern(self, q_len: int, k_len: int, *, causal: bool, device=None) -> Optional[torch.Tensor]:
        """The configured sparse pattern for the last ``q_len`` of ``k_len`` positions, or None (every key).

        Returns an (L, S) bool mask, True = blocked: :func:`~mha_lib.efficient.sliding_window_mask` with
        ``attention_window`` and ``attention_sinks`` (one-sided when ``causal``; an input shorter than the
        sinks has every key a sink), or BigBird's pattern (:func:`~mha_lib.efficient.block_sparse_layout`:
        one band block each side, one global block, one random block, seed 0) drawn for ``max_len`` rounded
        up to whole blocks, so that every length sees the same random blocks, and read at rows
        ``S - L .. S - 1``, columns ``0 .. S - 1``: equal to
        ``block_sparse_mask(blocks * sparse_block, ...)[S - L:S, :S]``. The block layout is drawn once
        and kept with this config (an :class:`Encoder` keeps its own copy of its config), per device; each
        call reads its (L, S) mask from it. A longer ``k_len`` (``positional="none"``) draws a layout for
        its length each time.

        Args:
            q_len: L, the positions queried (the last L), an int >= 0 (0: an empty (0, S) mask); k_len: S >= L,
                the positions attended.
            causal: one-sided window (a decoder) or two-sided (an encoder); the causal mask itself is the
                attention's own (``is_causal``).
            device: where to build the mask.

        Returns:
            an (L, S) bool tensor, or None when the config has no pattern.

        Raises:
            ValueError: ``q_len`` or ``k_len`` not an int >= 0, or ``k_len < q_len`` (naming them).
        """
        if not (self.attention_window or self.sparse_block):
            return None
        L, S = checks.nonnegative_int(q_len, "q_len"), checks.nonnegative_int(k_len, "k_len")
        if S < L:
            raise ValueError(f"k_len={S} < q_len={L}: the queries are the last {L} of the {S} positions")
        if L == 0:  # no query (an empty sequence): nothing to block
            return torch.zeros(0, S, dtype=torch.bool, device=device)
        if self.attention_window:
            sinks = min(self.attention_sinks, S)  # an input shorter than the sinks: every key is one
            return sliding_window_mask(L, S, window=self.attention_window, causal=causal, sinks=sinks, device=device)
        b = self.sparse_block
        seen = self._block_layout(-(-max(self.max_len, S) // b), device)   # (n, n) blocks, True = seen
        rows = torch.arange(S - L, S, device=seen.device) // b              # (L,): each query's block
        cols = torch.arange(S, device=seen.device) // b                     # (S,): each key's block
        return ~seen[rows[:, None], cols[None, :]]                          # (L, S)

    def _block_layout(self, n: int, device) -> torch.Tensor:
        """BigBird's (n, n) block layout on ``device``, drawn once for max_len's n and kept (per device) in
        this config's ``__dict__``, outside the dataclass fields (``to_dict``, ``==`` and ``repr`` ignore it)."""
        kept = self.__dict__.setdefault("_block_layouts", {})
        key = (n, self.sparse_block, str(torch.device("cpu") if device is None else torch.device(device)))
        if key in kept:
            return kept[key]
        layout = block_sparse_layout(n, local_blocks=1, global_blocks=1, random_blocks=1, seed=0).to(device)
        if n == -(-self.max_len // self.sparse_block):  # longer inputs (positional="none") are not kept
            if any(k[:2] != key[:2] for k in kept):  # max_len or sparse_block changed on this config
                kept.clear()
            kept[key] = layout
        return layout

    def _checked_heads_to_prune(self, pruned, where: str) -> dict:
        """Validate ``{layer: [heads]}`` completely (``checks.heads_by_layer``); change nothing."""
        return checks.heads_by_layer(pruned, where, num_layers=self.num_layers, num_heads=self.num_heads)

    def _normalise_pruned(self, pruned) -> dict:
        # JSON turns int keys into strings: only here, digit strings are read back as layers.
        if isinstance(pruned, Mapping):
            pruned = {int(k) if isinstance(k, str) and k.isdigit() else k: v for k, v in pruned.items()}
        out = self._checked_heads_to_prune(pruned, "EncoderConfig.pruned_heads")
        return dict(sorted((k, v) for k, v in out.items() if v))

    @property
    def head_dim(self) -> int:
        """d_k = d_model // num_heads."""
        return self.d_model // self.num_heads

    def to_dict(self) -> dict:
        """A JSON-able dict (pruned-head layer keys become strings)."""
        d = asdict(self)
        d["pruned_heads"] = {str(k): list(v) for k, v in self.pruned_heads.items()}
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "EncoderConfig":
        """Inverse of :meth:`to_dict`. Raises ValueError naming unknown keys."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"EncoderConfig.from_dict: unknown keys {unknown}")
        return cls(**dict(d))
