""":class:`BertEncoder` and :func:`load_bert`: a BERT-family checkpoint as an mha_lib encoder.

The encoder is an mha_lib :class:`~mha_lib.model.Encoder` with its tokenizer and
sentence-transformers pooling (only helpers added: its files load with ``mha_lib.model.load``);
:func:`load_bert` checks a checkpoint before anything is allocated and reads the pooling from the
checkpoint's folder.
"""
from __future__ import annotations

import os
import shutil
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F

from .. import checks
from ..model import Encoder, EncoderConfig, EncoderOutput
from ..model.io import CONFIG_NAME as MHA_CONFIG_NAME
from ..model.io import _LAYER_PATTERN as _MHA_LAYER_PATTERN
from ..model.io import _config_sizes, _read_meta, build_checked, check_config_sizes
from .checkpoint import _TEXT_FILES, _read_json, _require, bert_config_to_encoder_config, log, map_bert_state_dict, resolve_checkpoint
from .tokenizer import TokenBatch, WordPieceTokenizer


# ----------------------------------------------------------------------------- the encoder
class BertEncoder(Encoder):
    """An :class:`mha_lib.model.Encoder` holding a BERT checkpoint, plus text helpers.

    It *is* the one Encoder class (same blocks, same forward, same ``head_mask`` and
    ``prune_heads``); it adds the tokenizer and sentence-transformers' pooling. BERT:
    Devlin et al. 2019; pooling: Reimers & Gurevych 2019 (Sentence-BERT).

    Shapes and dtypes: token ids (B, L) long; ``key_padding_mask`` (B, L) bool, True =
    padding; ``last_hidden_state`` (B, L, d_model) float32 (d_model 384 for
    all-MiniLM-L6-v2); attention weights per layer (B, H_l, L, L) float32; sentence
    embeddings (N, d_model) float32.

    Args:
        config: the :class:`~mha_lib.model.EncoderConfig` (post-LN BERT settings).
        tokenizer: the :class:`WordPieceTokenizer`.
        pooling: a mode of ``POOLING_MODES`` ("cls", "max", "mean",
            "mean_sqrt_len_tokens", "weightedmean", "lasttoken"), or a tuple of them, whose
            vectors are concatenated in that order (as sentence-transformers does).
        normalize: L2-normalise pooled embeddings.
        source: a description of where the weights came from.
        folder: the checkpoint folder, to copy its tokenizer files on save.

    Raises:
        ValueError: a ``pooling`` mode not in ``POOLING_MODES``; a bad ``config`` (as
            :class:`~mha_lib.model.Encoder`).

    Attributes:
        tokenizer: the :class:`WordPieceTokenizer`.
        pooling: a mode or tuple of modes (from the checkpoint's ``1_Pooling/config.json``,
            "mean" when absent).
        normalize: L2-normalise sentence embeddings (``modules.json`` lists Normalize).
        source: where the weights came from (see :func:`resolve_checkpoint`).
    """

    _saved_class = "Encoder"  # its weights and config are an Encoder's

    def __init__(self, config: EncoderConfig, tokenizer: WordPieceTokenizer, *,
                 pooling: Union[str, Tuple[str, ...]] = "mean",
                 normalize: bool = False, source: str = "", folder: Optional[str] = None):
        super().__init__(config)
        modes = (pooling,) if isinstance(pooling, str) else tuple(pooling)
        bad = [m for m in modes if m not in POOLING_MODES]
        if bad or not modes:
            raise ValueError(f"pooling={pooling!r}: each mode must be one of {POOLING_MODES}")
        self.tokenizer = tokenizer
        self.pooling = modes[0] if len(modes) == 1 else modes
        self.normalize = normalize
        self.source = source
        self._folder = folder

    def tokenize(self, texts, text_pairs=None, *, warn: bool = True) -> TokenBatch:
        """``self.tokenizer(texts, text_pairs)``, on the model's device. See :class:`WordPieceTokenizer`.

        Returns:
            A :class:`TokenBatch`: input_ids and token_type_ids (B, L) long,
            key_padding_mask (B, L) bool, on the model's device.

        Raises:
            ValueError: an empty batch, a non-string text, or ``text_pairs`` of another
                length (from :class:`WordPieceTokenizer`).
        """
        return self.tokenizer(texts, text_pairs, warn=warn).to(self.token_embedding.weight.device)

    def encode_text(self, texts, text_pairs=None, **forward_kwargs) -> Tuple[EncoderOutput, TokenBatch]:
        """Tokenize and run the encoder in one call.

        Args:
            texts, text_pairs: as for :class:`WordPieceTokenizer`.
            **forward_kwargs: passed to :meth:`~mha_lib.model.Encoder.forward` (``head_mask``,
                ``output_attentions``, ``output_hidden_states``, ...).

        Returns:
            ``(output, batch)``: the :class:`~mha_lib.model.EncoderOutput` (last_hidden_state (B, L, d_model),
            attentions per layer (B, H_l, L, L)), and the :class:`TokenBatch` with the token
            strings for labelling plots.

        Raises:
            ValueError: bad texts (as :meth:`tokenize`), or a bad ``head_mask`` or other
                argument of :meth:`~mha_lib.model.Encoder.forward`.
        """
        batch = self.tokenize(texts, text_pairs)
        return self(**batch.model_inputs(), **forward_kwargs), batch

    def pool(self, last_hidden_state: torch.Tensor, key_padding_mask: torch.Tensor) -> torch.Tensor:
        """Sentence-transformers' pooling (Reimers & Gurevych 2019), then optional L2 norm.

        "mean": the average of the non-padding token vectors; "mean_sqrt_len_tokens": their sum
        over sqrt(length); "weightedmean": weighted by position 1..L (Muennighoff 2022,
        SGPT); "cls": the first token's vector; "max": the elementwise maximum over
        non-padding tokens; "lasttoken": the last non-padding token. Several modes are
        concatenated in the configured order, as sentence-transformers' ``Pooling`` does.

        Args:
            last_hidden_state: (B, L, d_model) float.
            key_padding_mask: (B, L) bool, True = padding.

        Returns:
            (B, n_modes * d_model) float, in ``last_hidden_state``'s dtype; unit L2 norm per row when
            ``self.normalize``.

        Raises:
            ValueError: ``last_hidden_state`` not 3-D, or ``key_padding_mask`` not a bool
                tensor of shape (B, L).
        """
        if not isinstance(last_hidden_state, torch.Tensor) or last_hidden_state.dim() != 3:
            raise ValueError(
                f"last_hidden_state must be (B, L, d_model), got {getattr(last_hidden_state, 'shape', last_hidden_state)}"
            )
        checks.padding_mask(key_padding_mask, tuple(last_hidden_state.shape[:2]), axes="B, L")
        h = last_hidden_state  # (B, L, d_model)
        keep = (~key_padding_mask).unsqueeze(-1).to(h.dtype)  # (B, L, 1), 1 on real tokens
        count = keep.sum(1).clamp(min=1e-9)  # (B, 1) real tokens per text
        position = torch.arange(1, h.shape[1] + 1, dtype=h.dtype, device=h.device).view(1, -1, 1)
        last = (keep.squeeze(-1) * position.view(1, -1)).argmax(1)  # (B,) index of the last real token
        vectors = {
            "cls": lambda: h[:, 0],  # the first token ([CLS]); padding is on the right
            "max": lambda: h.masked_fill(keep == 0, float("-inf")).amax(1).nan_to_num(neginf=0.0),  # no token: 0
            "mean": lambda: (h * keep).sum(1) / count,
            "mean_sqrt_len_tokens": lambda: (h * keep).sum(1) / count.sqrt(),
            "weightedmean": lambda: (h * keep * position).sum(1) / (keep * position).sum(1).clamp(min=1e-9),
            "lasttoken": lambda: h[torch.arange(h.shape[0], device=h.device), last],
        }
        modes = (self.pooling,) if isinstance(self.pooling, str) else self.pooling
        pooled = torch.cat([vectors[m]() for m in modes], dim=-1)  # (B, len(modes) * d_model)
        return F.normalize(pooled, p=2, dim=-1) if self.normalize else pooled

    def sentence_embeddings(self, texts, *, batch_size: int = 32, head_mask=None, grad: bool = False) -> torch.Tensor:
        """Sentence embeddings as sentence-transformers computes them for this checkpoint.

        Texts are stripped of surrounding whitespace (as sentence-transformers does),
        truncated to ``tokenizer.max_length`` (with a warning), encoded in batches of
        ``batch_size``, pooled (mean over non-padding tokens for all-MiniLM-L6-v2) and
        L2-normalised when the checkpoint lists a Normalize module. Texts are batched in
        order of length (less padding); the rows come back in the order given. Runs without
        autograd unless ``grad=True`` (e.g. for head importance through a ``head_mask``).

        Args:
            texts: a str or a list of str (pairs: pass tuples).
            batch_size: texts per forward pass (> 0).
            head_mask: optional, as in :meth:`~mha_lib.model.Encoder.forward` (shape (num_layers, H) or
                per-layer), e.g. to see what masking heads does to the embeddings. A
                per-example mask ((num_layers, N, H), or per-layer (N, H_l)) gates text i with
                row i: all N texts then run in one batch, in their order.
            grad: keep the autograd graph (gradients flow to ``head_mask`` and the weights).

        Returns:
            float tensor (N, d_model) on the model's device; rows have unit L2 norm when
            ``self.normalize``.

        Raises:
            ValueError: empty input or batch_size < 1.
        """
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        for t in texts:  # None is not the text "None"
            parts = t if isinstance(t, (tuple, list)) else (t,)
            if not all(isinstance(p, str) for p in parts):
                raise ValueError(f"texts must be strings (or pairs of strings), got {t!r}")
        texts = [tuple(s.strip() for s in t) if isinstance(t, (tuple, list)) else t.strip() for t in texts]
        if not texts:
            raise ValueError("texts is empty")
        batch_size = checks.positive_int(batch_size, "batch_size")
        if head_mask is not None and not (isinstance(head_mask, torch.Tensor) or (
                isinstance(head_mask, (list, tuple)) and all(m is None or isinstance(m, torch.Tensor) for m in head_mask))):
            raise ValueError(f"head_mask must be a tensor or a list of per-layer tensors (or None), got {head_mask!r:.80}")
        if isinstance(head_mask, torch.Tensor) and head_mask.dim() not in (2, 3):
            raise ValueError(f"head_mask tensor must be (num_layers, H) or (num_layers, N, H), got {tuple(head_mask.shape)}")
        per_example = head_mask is not None and any(m is not None and m.dim() >= 2 for m in (
            list(head_mask) if isinstance(head_mask, (list, tuple)) else [head_mask[0]]))
        if per_example:
            order, batch_size = list(range(len(texts))), len(texts)
        else:
            order = sorted(range(len(texts)), key=lambda i: len(str(texts[i])))
        rows, cut = [None] * len(texts), []
        with torch.set_grad_enabled(checks.flag(grad, "grad")):
            for start in range(0, len(texts), batch_size):
                idx = order[start : start + batch_size]
                chunk = [texts[i] for i in idx]
                batch = self.tokenize(chunk, warn=False)
                cut += [t for t, was_cut in zip(chunk, batch.truncated) if was_cut]
                h = self(**batch.model_inputs(), head_mask=head_mask).last_hidden_state  # (b, L, d_model)
                for i, row in zip(idx, self.pool(h, batch.key_padding_mask)):
                    rows[i] = row
        if cut:  # one warning for the whole call, not one per batch
            self.tokenizer._warn_truncated(cut, len(texts), stacklevel=3)
        return torch.stack(rows)

    def save_pretrained(self, path) -> str:
        """Save as an mha_lib Encoder (``mha_lib_config.json`` + ``model.safetensors``, pruned
        heads included), plus the tokenizer and sentence-transformers files, so that both
        ``mha_lib.model.load(path)`` and ``load_bert(path)`` read it back."""
        super().save_pretrained(path)
        if self._folder:
            for name in _TEXT_FILES:
                src = os.path.join(self._folder, name)
                if os.path.isfile(src) and os.path.abspath(src) != os.path.abspath(os.path.join(path, name)):
                    os.makedirs(os.path.dirname(os.path.join(path, name)), exist_ok=True)
                    shutil.copyfile(src, os.path.join(path, name))
        return str(path)

    @classmethod
    def from_pretrained(cls, path, map_location: Union[str, torch.device] = "cpu") -> "BertEncoder":
        """A :class:`BertEncoder` (with its tokenizer) from ``path``: ``load_bert(path)[0]``.

        Unlike ``Encoder.from_pretrained`` (:func:`mha_lib.model.load`),
        which returns a plain :class:`~mha_lib.model.Encoder`, this reads the tokenizer and
        pooling files too, so ``path`` may be a folder written by :meth:`save_pretrained`,
        a transformers BERT checkpoint folder, or a hub id (see :func:`load_bert`).

        Args:
            path: as ``name_or_path`` of :func:`load_bert`.
            map_location: device for the model.

        Returns:
            The :class:`BertEncoder`, in eval mode (float32).

        Raises:
            ValueError: as :func:`load_bert`; also when ``path`` has no tokenizer files.
        """
        return load_bert(path, verbose=False, device=map_location)[0]


# ----------------------------------------------------------------------------- load_bert
def load_bert(name_or_path: Optional[Union[str, os.PathLike]] = None, *, verbose: bool = True,
              device: Union[str, torch.device] = "cpu") -> Tuple[BertEncoder, WordPieceTokenizer]:
    """Load a BERT-family checkpoint into mha_lib's encoder.

    BERT: Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for
    Language Understanding" (post-LN encoder, learned positions, token types).

    Args:
        name_or_path: a folder with a transformers BERT checkpoint (config.json +
            model.safetensors + tokenizer.json/vocab.txt), a folder written by
            ``BertEncoder.save_pretrained``, a hub id, or None for
            sentence-transformers/all-MiniLM-L6-v2 (see :func:`resolve_checkpoint`).
        verbose: print one line saying which source was used.
        device: where to put the model.

    Returns:
        ``(model, tokenizer)``: a :class:`BertEncoder` in eval mode (float32) and its
        :class:`WordPieceTokenizer`. ``model(input_ids, token_type_ids=...,
        key_padding_mask=..., head_mask=..., output_attentions=True)`` gives the same
        hidden states and per-head attention weights as transformers' ``BertModel``
        (eager attention), to about 1e-5.

    Raises:
        ValueError: "no checkpoint in <path>: found [...]" when config.json or
            model.safetensors is missing (``pytorch_model.bin`` is never unpickled); a
            config.json (or other JSON file) that is not valid JSON, not a JSON object, or
            lacks a required key (naming the file and the key); a non-BERT model_type or
            ``is_decoder: true`` (naming it); a model.safetensors that cannot be read
            (naming the path); a ``max_seq_length`` in sentence_bert_config.json that is not
            an integer >= 3 (null falls back to max_position_embeddings); a tensor
            missing, unknown or of the wrong shape (naming the key); a size in the config
            above ``mha_lib.model.CONFIG_SIZE_LIMITS`` (naming the file and the field); a
            JSON file nested too deeply to parse (naming it); a tokenizer with more ids than the
            embedding table has rows (giving both sizes).
        ImportError: ``tokenizers`` (or ``huggingface_hub`` for hub ids) missing; the
            message names ``pip install "mha_lib[pretrained]"``.
    """
    folder, source = resolve_checkpoint(name_or_path)
    if verbose:
        print(f"mha_lib.pretrained: loading from {source}")
    _require("safetensors")
    found = sorted(os.listdir(folder))
    st_cfg = _read_json(os.path.join(folder, "sentence_bert_config.json")) or {}
    modules = _read_json(os.path.join(folder, "modules.json"), kind=list) or []
    pooling, normalize = _sentence_transformers_modules(folder, modules)

    weights_path = os.path.join(folder, "model.safetensors")
    if os.path.isfile(os.path.join(folder, MHA_CONFIG_NAME)):  # saved by BertEncoder.save_pretrained
        meta = _read_meta(folder)
        try:
            config = EncoderConfig.from_dict(meta["config"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{os.path.join(folder, MHA_CONFIG_NAME)}: {type(err).__name__}: {err}") from None
        check_config_sizes(_config_sizes(config), os.path.join(folder, MHA_CONFIG_NAME))
        rename, layer_pattern = None, _MHA_LAYER_PATTERN
    else:
        cfg_path = os.path.join(folder, "config.json")
        if not (os.path.isfile(cfg_path) and os.path.isfile(weights_path)):
            raise ValueError(
                f"no checkpoint in {folder}: need config.json and model.safetensors "
                f"(pickled .bin weights are never loaded), found {found}"
            )
        config = bert_config_to_encoder_config(_read_json(cfg_path), source=cfg_path)
        layer_pattern = r"(?:^|\.)encoder\.layer\.(\d+)\."

        def rename(names):  # transformers' names -> ours; the pooler and task heads are skipped
            mapped, skipped = map_bert_state_dict({n: n for n in names}, config.num_layers)
            if skipped:
                log.info("mha_lib.pretrained: not used by the encoder: %s", skipped)
            return {file_name: ours for ours, file_name in mapped.items()}

    # sentence-transformers' limit; null or absent means "the position table's length".
    max_seq = st_cfg.get("max_seq_length")
    if max_seq is None:
        max_seq = config.max_len
    elif isinstance(max_seq, bool) or not isinstance(max_seq, int) or max_seq < 3:
        raise ValueError(
            f"{os.path.join(folder, 'sentence_bert_config.json')}: max_seq_length={max_seq!r} must be an "
            f"integer >= 3 ([CLS], [SEP] and a pair's second [SEP]) or null"
        )
    max_length = min(max_seq, config.max_len)
    tokenizer = WordPieceTokenizer.from_folder(folder, max_length, pad_token_id=config.pad_token_id or 0)
    _check_tokenizer_fits(tokenizer, config, folder)
    model = build_checked(
        lambda: BertEncoder(config, tokenizer, pooling=pooling, normalize=normalize, source=source, folder=folder),
        weights_path, layers=config.num_layers, layer_pattern=layer_pattern, rename=rename,
    )  # the config is checked against the file's header before any weight is allocated
    return model.to(device).eval(), tokenizer


def _check_tokenizer_fits(tokenizer: WordPieceTokenizer, config: EncoderConfig, folder: str) -> None:
    """Refuse a tokenizer with more ids than the embedding table has rows: its ids past the table
    would load fine and fail later, on the texts that produce them. Fewer ids is fine (the table's
    extra rows are never looked up)."""
    if tokenizer.vocab_size > config.vocab_size:
        name = "tokenizer.json" if os.path.isfile(os.path.join(folder, "tokenizer.json")) else "vocab.txt"
        raise ValueError(
            f"{os.path.join(folder, name)}: the tokenizer has {tokenizer.vocab_size:,} ids (added tokens included), "
            f"the embedding table has vocab_size={config.vocab_size:,} rows; ids from {config.vocab_size:,} on "
            f"would fail on the texts that produce them"
        )


POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
# sentence-transformers' older config keys, in the order it concatenates the vectors
_LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max", "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken",
}


def _sentence_transformers_modules(folder: str, modules: list) -> Tuple[Union[str, Tuple[str, ...]], bool]:
    """(pooling, normalize) from a sentence-transformers folder, or a ValueError for a module
    (Dense, a second Transformer, ...) or pooling mode that load_bert cannot reproduce: the
    embeddings must equal sentence-transformers', never a silent substitute."""
    normalize = False
    for m in modules:
        kind = str(m.get("type", "")) if isinstance(m, dict) else repr(m)
        short = kind.rsplit(".", 1)[-1]
        if short == "Normalize":
            normalize = True
        elif short not in ("Transformer", "Pooling"):
            raise ValueError(
                f"{os.path.join(folder, 'modules.json')}: module {kind!r} ({m.get('path') if isinstance(m, dict) else m}) "
                f"is not supported: load_bert reproduces Transformer -> Pooling -> Normalize only, so its sentence "
                f"embeddings would differ from sentence-transformers'"
            )
    cfg_path = os.path.join(folder, "1_Pooling", "config.json")
    cfg = _read_json(cfg_path) or {}
    if "pooling_mode" in cfg:
        modes = cfg["pooling_mode"]
        modes = (modes,) if isinstance(modes, str) else tuple(modes) if isinstance(modes, list) else (modes,)
    else:
        modes = tuple(mode for key, mode in _LEGACY_POOLING_KEYS.items() if cfg.get(key)) or ("mean",)
    bad = [m for m in modes if m not in POOLING_MODES]
    if bad or not modes:
        raise ValueError(f"{cfg_path}: pooling mode(s) {bad or modes!r} not among {POOLING_MODES}")
    return (modes[0] if len(modes) == 1 else modes), normalize
