"""The ``"translate"`` view's numbers (chapter 6): :func:`translation_config`, and
:func:`translation_readings`, what the page computes by greedy decoding of the encoder-decoder on the
reader's source sentence (the exported file run once per step)."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import torch

from .. import tasks as T
from ..model import EncoderDecoder


def word_name(token_id: int, prefix: str) -> str:
    """A token id as chapter 6 writes it: ``<bos>``, ``<eos>``, ``<pad>``, else ``s<k>`` / ``t<k>`` (k = id - 3)."""
    return {T.TranslationTask.PAD: "<pad>", T.TranslationTask.BOS: "<bos>",
            T.TranslationTask.EOS: "<eos>"}.get(int(token_id), f"{prefix}{int(token_id) - 3}")


def _check_words(words: Any, task) -> List[int]:
    if isinstance(words, torch.Tensor):
        words = words.tolist()
    if isinstance(words, (str, bytes)) or not isinstance(words, (list, tuple)):
        raise ValueError(f"words must be a list of source word numbers k (the word s<k>), got "
                         f"{type(words).__name__}: {words!r:.60}")
    if not 1 <= len(words) <= task.max_words:
        raise ValueError(f"words has {len(words)} words; a source sentence has 1 to {task.max_words}")
    for i, k in enumerate(words):
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < task.num_words:
            raise ValueError(f"words[{i}] = {k!r:.40} is not a word number in [0, {task.num_words})")
    return list(words)


@torch.no_grad()
def translation_readings(model, task, words: Sequence[int]) -> Dict[str, Any]:
    """What the ``"translate"`` view shows: greedy decoding of ``words`` and the cross-attention of every step.

    Args:
        model: chapter 6's :class:`~mha_lib.model.EncoderDecoder` (``tasks.load_trained("ch6-translation")``).
        task: its :class:`~mha_lib.tasks.TranslationTask` (``spec.make_task()``).
        words: the source sentence as word numbers k (the word ``s<k>``, id k + 3), 1 to ``max_words``.

    Returns:
        a dict with ``source_ids`` (the source ids: the words, then EOS), ``tokens`` (the ids
        :meth:`~mha_lib.model.EncoderDecoder.generate` gives, up to and with the first EOS, at most
        ``seq_len``), ``confidence`` (each token's softmax probability), ``cross``
        ([layer][head][step][source position]: the cross-attention of the position that predicted each
        token; a causal decoder gives step t the same weights whether run on the prefix or on the
        whole output), ``expected`` (the task's translation: the dictionary words in reverse order,
        then EOS) and ``aligned`` ([layer][head]: the mean weight on the aligned source word over the
        steps that predict a word, :meth:`~mha_lib.tasks.TranslationTask.relation_targets`'s alignment).

    Raises:
        ValueError: a model that is not an EncoderDecoder, a task that is not a TranslationTask, words
            that are not 1 to max_words integers in [0, num_words).
    """
    if not isinstance(model, EncoderDecoder):
        raise ValueError(f"model must be chapter 6's EncoderDecoder (tasks.load_trained('ch6-translation')), got "
                         f"{type(model).__name__}")
    if not isinstance(task, T.TranslationTask):
        raise ValueError(f"task must be a TranslationTask, got {type(task).__name__}")
    words = _check_words(words, task)
    n = len(words)
    src = torch.tensor([[k + 3 for k in words] + [task.EOS]])  # (1, S)
    was_training = model.training
    model.eval()
    try:
        out_ids = model.generate(src, bos_id=task.BOS, max_new_tokens=task.seq_len, eos_id=task.EOS)[0].tolist()
        stop = out_ids.index(task.EOS) + 1 if task.EOS in out_ids else len(out_ids)
        tokens = out_ids[:stop]
        inputs = torch.tensor([[task.BOS] + tokens[:-1]])  # (1, T): what each step's decoder read
        out = model(inputs, src_ids=src, output_attentions=True)
    finally:
        model.train(was_training)
    probs = out.logits[0].float().softmax(-1)  # (T, C)
    confidence = probs[torch.arange(len(tokens)), torch.tensor(tokens)]
    f = task.dictionary().tolist()
    expected = [f[k + 3] for k in reversed(words)] + [task.EOS]
    cross = [w[0].float() for w in out.cross_attentions]  # per layer (H, T, S)
    steps = min(n, len(tokens))  # steps that predict a word of the translation
    aligned = [[float(sum(w[h, j, n - 1 - j] for j in range(steps)) / steps) if steps else 0.0
                for h in range(w.shape[0])] for w in cross]
    return {"source_ids": src[0].tolist(), "tokens": tokens, "confidence": confidence.tolist(),
            "cross": [w.tolist() for w in cross], "expected": expected, "aligned": aligned}


def translation_config(spec_name: str, words: Sequence[int]) -> Dict[str, Any]:
    """The initial state of a ``"translate"`` view: chapter 6's encoder-decoder on a source sentence.

    The page shows the reader's source sentence (typed as words ``s0`` ... ``s23``), the greedy
    translation step by step with each step's cross-attention, and the task's own translation.

    Args:
        spec_name: a name of :data:`mha_lib.tasks.SHIPPED` trained on
            :class:`~mha_lib.tasks.TranslationTask` (chapter 6: ``"ch6-translation"``; the site ships
            its first seed).
        words: the sentence shown first, as word numbers k (1 to ``max_words`` of them).

    Returns:
        a dict with ``models`` (``[spec_name]``), ``task`` (``num_words``, ``min_words``,
        ``max_words``, ``bos``, ``eos``), ``dictionary`` (the id each id translates to), ``words``
        and the keys of :func:`translation_readings`.

    Raises:
        ValueError: an unknown name or a model of another task; bad words (as :func:`translation_readings`).
    """
    if not isinstance(spec_name, str) or spec_name not in T.SHIPPED:
        raise ValueError(f"spec_name {spec_name!r:.60} is not a shipped model (mha_lib.tasks.SHIPPED)")
    spec = T.SHIPPED[spec_name]
    task = spec.make_task()
    if not isinstance(task, T.TranslationTask):
        raise ValueError(f"{spec_name!r} was trained on {task.to_dict()}: a translate view runs chapter 6's "
                         "TranslationTask")
    words = _check_words(words, task)
    readings = translation_readings(T.load_trained(spec), task, words)
    return {"models": [spec_name], "task": {"num_words": task.num_words, "min_words": task.min_words,
                                            "max_words": task.max_words, "bos": task.BOS, "eos": task.EOS},
            "dictionary": task.dictionary().tolist(), "words": words, **readings}
