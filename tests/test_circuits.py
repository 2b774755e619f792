"""Tests for the induction-circuit tools of mha_lib.analysis (section 4) and the repeat task."""
import pytest
import torch

from mha_lib.analysis import (
    copying_score,
    full_ov_circuit,
    induction_score,
    induction_targets,
    ov_circuit,
    previous_token_score,
    qk_circuit,
)
from mha_lib.core import MultiHeadAttention
from mha_lib.model import EncoderConfig, TokenClassifier
from mha_lib.tasks import IGNORE_INDEX, InductionTask, per_example_loss, task_from_dict


def _one_hot_maps(targets, L, H=1):
    """(1, H, L, L) weights putting all weight on key targets[i] (or on key 0 when -1)."""
    w = torch.zeros(1, H, L, L)
    for i, j in enumerate(targets):
        w[0, :, i, max(j, 0)] = 1.0
    return w


def test_a_hand_set_previous_token_head_scores_one_and_uniform_scores_less():
    L = 6
    prev = _one_hot_maps([-1] + list(range(L - 1)), L)
    assert float(previous_token_score(prev)[0]) == 1.0
    uniform = torch.tril(torch.ones(L, L))
    uniform = (uniform / uniform.sum(-1, keepdim=True))[None, None]
    expected = sum(1 / (i + 1) for i in range(1, L)) / (L - 1)
    assert float(previous_token_score(uniform)[0]) == pytest.approx(expected)
    with pytest.raises(ValueError, match="L >= 2"):
        previous_token_score(torch.ones(1, 1, 1, 1))
    with pytest.raises(ValueError, match=r"\(B, H, L, L\)"):
        previous_token_score(torch.ones(2, 3, 3))


def test_induction_targets_and_a_hand_set_induction_head():
    ids = torch.tensor([[5, 1, 2, 3, 9, 1, 2, 3]])  # segment 1 2 3 repeats at 5
    targets = induction_targets(ids)
    assert targets[0, 5].nonzero().flatten().tolist() == [2]  # query "1" -> key after the first "1"
    assert targets[0, 7].nonzero().flatten().tolist() == [4]  # query "3" -> "9"
    assert not targets[0, :5].any()  # nothing repeats before position 5
    perfect = _one_hot_maps([0, 0, 0, 0, 0, 2, 3, 4], 8)
    assert float(induction_score(perfect, ids)[0]) == 1.0
    previous = _one_hot_maps([0, 0, 1, 2, 3, 4, 5, 6], 8)
    assert float(induction_score(previous, ids)[0]) == 0.0
    with pytest.raises(ValueError, match="undefined"):
        induction_score(perfect, torch.arange(8)[None])
    with pytest.raises(ValueError, match="does not match"):
        induction_score(perfect, ids[:, :7])
    with pytest.raises(ValueError, match="integer"):
        induction_targets(ids.float())


def test_copying_score_of_known_matrices():
    assert copying_score(torch.eye(5)) == pytest.approx(1.0)
    assert copying_score(-2 * torch.eye(5)) == pytest.approx(-1.0)
    rotation = torch.tensor([[0.0, -1.0], [1.0, 0.0]])  # eigenvalues +-i: no copying
    assert copying_score(rotation) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="square"):
        copying_score(torch.ones(2, 3))
    with pytest.raises(ValueError, match="NaN"):
        copying_score(torch.full((2, 2), float("nan")))
    with pytest.raises(ValueError, match="undefined"):
        copying_score(torch.zeros(3, 3))


@pytest.mark.parametrize("num_kv_heads", [None, 2, 1])
def test_qk_and_ov_circuits_reproduce_the_module(num_kv_heads):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads, bias=False).eval()
    x = torch.randn(1, 5, 16)
    out, weights = mha(x, need_weights=True)
    for h in range(4):
        scores = x[0] @ qk_circuit(mha, h) @ x[0].T / 4**0.5  # head_dim 4
        torch.testing.assert_close(torch.softmax(scores, -1), weights[0, h], atol=1e-5, rtol=1e-5)
    # the output is the sum over heads of alpha x W_OV (no biases)
    rebuilt = sum(weights[0, h] @ x[0] @ ov_circuit(mha, h) for h in range(4))
    torch.testing.assert_close(rebuilt, out[0], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="head=4"):
        qk_circuit(mha, 4)
    with pytest.raises(ValueError, match="head"):
        ov_circuit(mha, 1.0)


def test_full_ov_circuit_of_an_identity_path_copies():
    cfg = EncoderConfig(vocab_size=6, d_model=8, num_heads=2, num_layers=1, d_ff=0, max_len=8, is_causal=True,
                        pad_token_id=None)
    torch.manual_seed(0)
    model = TokenClassifier(cfg, 6)
    with torch.no_grad():
        emb = torch.zeros(6, 8)
        emb[:, :6] = torch.eye(6)
        model.encoder.token_embedding.weight.copy_(emb)
        model.readout.weight.copy_(emb)  # W_U = W_E^T
        attn = model.encoder.blocks[0].attn
        attn.v_proj.weight.zero_()
        attn.out_proj.weight.zero_()
        attn.v_proj.weight[:4, :4] = torch.eye(4)  # head 0 passes dims 0-3 ...
        attn.out_proj.weight[:4, :4] = torch.eye(4)  # ... back to dims 0-3
    assert copying_score(full_ov_circuit(model, 0, 0)) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="layer=1"):
        full_ov_circuit(model, 1, 0)
    with pytest.raises(ValueError, match="language model"):
        full_ov_circuit(TokenClassifier(cfg, 3), 0, 0)


def test_induction_task_batches_are_well_formed():
    task = InductionTask(vocab_size=20, seq_len=24, repeat_lengths=(2, 5, 12))
    batch = task.dataset(500, seed=3)
    assert batch.token_type_ids is None and batch.input_ids.shape == (500, 24)
    assert torch.equal(batch.input_ids, task.dataset(500, seed=3).input_ids)
    r = (batch.labels != IGNORE_INDEX).sum(1) + 1
    assert set(r.tolist()) == {2, 5, 12}
    s1, s2 = batch.source, batch.marked
    assert bool((s2 >= s1 + r).all()) and bool((s2 + r <= 24).all())
    assert len(set((s2 - s1).tolist())) > 5  # the distance varies: no fixed offset finds the copy
    for b in range(50):
        n = int(r[b])
        assert torch.equal(batch.input_ids[b, s2[b]:s2[b] + n], batch.input_ids[b, s1[b]:s1[b] + n])
        labelled = (batch.labels[b] != IGNORE_INDEX).nonzero().flatten()
        assert labelled.tolist() == list(range(int(s2[b]), int(s2[b]) + n - 1))
        assert torch.equal(batch.labels[b, labelled], batch.input_ids[b, labelled + 1])
    targets = task.relation_targets(batch)  # (B, 2, L)
    ok = targets[:, 1] >= 0
    # the induction target of every labelled query holds the label
    rows, cols = ok.nonzero(as_tuple=True)
    assert torch.equal(batch.input_ids[rows, targets[:, 1][ok]], batch.labels[rows, cols])
    assert task_from_dict(task.to_dict()) == task


def test_induction_task_max_distance_keeps_every_copy_within_reach():
    # chapter 9's within-reach test: every copy at most max_distance back, the rest of the task unchanged
    near = InductionTask(repeat_lengths=(3, 4, 8), max_distance=8)
    batch = near.dataset(2000, seed=5)
    d = batch.marked - batch.source
    r = (batch.labels != IGNORE_INDEX).sum(1) + 1
    assert int(d.max()) == 8 and bool((d >= r).all()) and set(d.tolist()) == set(range(3, 9))
    assert task_from_dict(near.to_dict()) == near and near.to_dict()["max_distance"] == 8
    # without it, the dictionary and the stream are those of the shipped task (the shipped specs' keys)
    full = InductionTask(repeat_lengths=(3, 4, 8))
    assert "max_distance" not in full.to_dict()
    assert int((full.dataset(2000, seed=5).marked - full.dataset(2000, seed=5).source).max()) > 20
    assert torch.equal(full.dataset(50, seed=1).input_ids, InductionTask(repeat_lengths=(3, 4, 8)).dataset(50, seed=1).input_ids)


@pytest.mark.parametrize("bad, match", [
    (dict(repeat_lengths=(3, 8), max_distance=7), r"max_distance=7 .*repeat length 8"),
    (dict(max_distance=2.5), "max_distance"),
    (dict(max_distance=True), "max_distance"),
    (dict(repeat_lengths=(1, 3)), "repeat_lengths"),
    (dict(repeat_lengths=()), "repeat_lengths"),
    (dict(repeat_lengths="34"), "repeat_lengths"),
    (dict(seq_len=10, repeat_lengths=(6,)), r"\[6\] do not fit"),
    (dict(vocab_size=1.5), "vocab_size"),
])
def test_induction_task_rejects_bad_settings(bad, match):
    with pytest.raises(ValueError, match=match):
        InductionTask(**bad)


def test_task_from_dict_names_unknown_kinds_and_fields():
    with pytest.raises(ValueError, match="unknown task kind 'copy'"):
        task_from_dict({"kind": "copy"})
    with pytest.raises(ValueError, match="induction"):
        task_from_dict({"kind": "induction", "colour": 1})


def test_a_causal_model_trains_on_the_task_without_token_types():
    task = InductionTask(vocab_size=10, seq_len=12, repeat_lengths=(3,))
    cfg = EncoderConfig(vocab_size=10, d_model=16, num_heads=2, num_layers=2, d_ff=0, max_len=12, is_causal=True,
                        pad_token_id=None)
    torch.manual_seed(0)
    model = TokenClassifier(cfg, 10)
    loss = per_example_loss(model, task.sample(4, torch.Generator().manual_seed(0)))
    assert loss.shape == (4,) and bool(torch.isfinite(loss).all())
    scores = task.curve_scores(model.eval(), task.dataset(8, seed=0))
    assert set(scores) == {"previous", "induction"}
    assert len(scores["previous"]) == 2 and len(scores["previous"][0]) == 2


def test_circuits_follow_kv_head_index_after_uneven_gqa_pruning():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, num_kv_heads=2, bias=False).eval()
    mha.prune_heads([3])  # heads 0, 1 read KV head 0; head 2 reads KV head 1
    x = torch.randn(1, 5, 16)
    _, weights = mha(x, need_weights=True)
    for h in range(mha.num_heads):
        scores = x[0] @ qk_circuit(mha, h) @ x[0].T / 4**0.5
        torch.testing.assert_close(torch.softmax(scores, -1), weights[0, h], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="MultiHeadAttention"):
        qk_circuit(torch.nn.Linear(4, 4), 0)


@pytest.mark.parametrize("bad, match", [
    (torch.ones(1, 1, 3, 3, dtype=torch.bool), "floating point"),
    (torch.full((1, 1, 3, 3), float("nan")), "NaN"),
    (torch.full((1, 1, 3, 3), 2 / 3), "not attention weights"),
    (torch.zeros(0, 1, 3, 3), "no sequence"),
])
def test_scores_refuse_what_is_not_attention_weights(bad, match):
    with pytest.raises(ValueError, match=match):
        previous_token_score(bad)
    with pytest.raises(ValueError, match=match):
        induction_score(bad, torch.tensor([[1, 1, 1]]).expand(bad.shape[0], 3))


def test_induction_targets_refuse_negative_ids_and_full_ov_refuses_post_ln():
    with pytest.raises(ValueError, match=">= 0"):
        induction_targets(torch.tensor([[-1, 2, -1, 2]]))
    cfg = EncoderConfig(vocab_size=6, d_model=8, num_heads=2, num_layers=1, d_ff=0, max_len=8, is_causal=True,
                        pad_token_id=None, norm_first=False)
    with pytest.raises(ValueError, match="post-LN"):
        full_ov_circuit(TokenClassifier(cfg, 6), 0, 0)
