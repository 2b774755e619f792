"""The synthetic task of chapter 1, the head-specialisation measure, and the shipped-model registry."""
from __future__ import annotations

import json

import pytest
import torch

from mha_lib.model import EncoderConfig

from mha_lib import tasks
from mha_lib.tasks import IGNORE_INDEX, PrevMarkedTask, TaskBatch, best_heads
from mha_lib.tasks import target_shares as relation_shares


# ----------------------------------------------------------------------------- the generator
def test_shapes_dtypes_and_ranges():
    task = PrevMarkedTask(vocab_size=8, seq_len=12)
    b = task.dataset(50, seed=3)
    for t in (b.input_ids, b.token_type_ids, b.labels):
        assert t.shape == (50, 12) and t.dtype == torch.long
    assert b.marked.shape == (50,)
    assert 0 <= int(b.input_ids.min()) and int(b.input_ids.max()) < 8
    assert torch.equal(b.token_type_ids.sum(1), torch.ones(50, dtype=torch.long))  # exactly one mark
    assert torch.equal(b.token_type_ids.argmax(1), b.marked)
    assert (b.labels[:, 0] == IGNORE_INDEX).all()
    assert ((b.labels[:, 1:] >= 0) & (b.labels[:, 1:] < 8)).all()


def test_labels_checked_by_hand():
    task = PrevMarkedTask(vocab_size=10, seq_len=5)
    x = torch.tensor([[3, 7, 1, 9, 4]])
    m = torch.tensor([1])  # marked token 7
    # build the batch the way sample() labels it, then check every position by hand
    labels = torch.full((1, 5), IGNORE_INDEX)
    labels[:, 1:] = task.combine(x[:, :-1], x[0, m][:, None])
    # y_1 = 3-7 = -4 = 6 (mod 10); y_2 = 7-7 = 0 (the mark is the previous token);
    # y_3 = 1-7 = 4; y_4 = 9-7 = 2
    assert labels.tolist() == [[IGNORE_INDEX, 6, 0, 4, 2]]
    add = PrevMarkedTask(vocab_size=10, seq_len=5, op="add")
    assert add.combine(x[:, :-1], x[0, m][:, None]).tolist() == [[0, 4, 8, 6]]


def test_labels_right_by_construction_on_random_batches():
    for op in ("sub", "add"):
        task = PrevMarkedTask(vocab_size=16, seq_len=16, op=op)
        b = task.dataset(200, seed=1)
        for s in range(200):
            x, m = b.input_ids[s].tolist(), int(b.marked[s])
            for i in range(1, 16):
                want = (x[i - 1] - x[m]) % 16 if op == "sub" else (x[i - 1] + x[m]) % 16
                assert int(b.labels[s, i]) == want


def test_one_token_alone_says_nothing_about_the_label():
    # the design claim: for a fixed marked token the label runs over every class, and vice versa
    task = PrevMarkedTask(vocab_size=6, seq_len=4)
    prev = torch.arange(6)
    for marked in range(6):
        assert sorted(task.combine(prev, torch.tensor(marked)).tolist()) == list(range(6))
        assert sorted(task.combine(torch.tensor(marked), prev).tolist()) == list(range(6))


def test_determinism_and_seed_dependence():
    task = PrevMarkedTask()
    a, b, c = task.dataset(64, seed=7), task.dataset(64, seed=7), task.dataset(64, seed=8)
    assert all(s is t is None or torch.equal(s, t) for s, t in zip(a, b))  # `source` is None here
    assert not torch.equal(a.input_ids, c.input_ids)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(task.sample(9, g1).labels, task.sample(9, g2).labels)


def test_marks_and_tokens_are_uniform_enough():
    b = PrevMarkedTask(vocab_size=4, seq_len=8).dataset(8000, seed=0)
    mark_freq = torch.bincount(b.marked, minlength=8).float() / 8000
    token_freq = torch.bincount(b.input_ids.flatten(), minlength=4).float() / b.input_ids.numel()
    assert (mark_freq - 1 / 8).abs().max() < 0.02
    assert (token_freq - 1 / 4).abs().max() < 0.01


def test_ceilings_by_hand():
    # V = 4, L = 2: the only labelled position is i = 1, and it coincides with the mark (m = 0)
    # with probability p = 1/2, when the label is 0.
    c = PrevMarkedTask(vocab_size=4, seq_len=2).ceilings()
    assert c["constant"] == pytest.approx(0.5 * 4 / 16 + 0.5)  # always guess 0
    assert c["one_relation"] == pytest.approx(0.5 + 0.5 / 4)
    # unordered pairs: {a, a} -> 0 (4 pairs right); a - b = 2 = -2 mod 4 (4 pairs right);
    # a - b = +-1 (8 pairs, half right): 12 of 16
    assert c["even_blend"] == pytest.approx(0.5 + 0.5 * 12 / 16)
    add = PrevMarkedTask(vocab_size=4, seq_len=2, op="add").ceilings()
    assert add["even_blend"] == 1.0  # the sum does not care about the order


def test_ceilings_match_simple_predictors_on_data():
    task = PrevMarkedTask(vocab_size=8, seq_len=16)
    b = task.dataset(4000, seed=4)
    keep = b.labels != IGNORE_INDEX
    c = task.ceilings()
    always_zero = ((b.labels == 0) & keep).sum() / keep.sum()
    assert float(always_zero) == pytest.approx(c["constant"], abs=0.01)
    # one relation: read x_{i-1} only, answer 0 where it is the marked token, else guess x_{i-1}
    prev = torch.zeros_like(b.labels)
    prev[:, 1:] = b.input_ids[:, :-1]
    coincide = torch.zeros_like(keep)
    coincide[:, 1:] = b.token_type_ids[:, :-1] == 1
    guess = torch.where(coincide, torch.zeros_like(prev), prev)
    assert float(((guess == b.labels) & keep).sum() / keep.sum()) == pytest.approx(c["one_relation"], abs=0.01)
    assert c["constant"] <= c["one_relation"] < c["even_blend"] < c["both"] == 1.0


@pytest.mark.parametrize(
    "kwargs", [dict(vocab_size=1), dict(seq_len=1), dict(op="mul"), dict(vocab_size=2.0), dict(seq_len=True)]
)
def test_bad_task_arguments(kwargs):
    with pytest.raises(ValueError, match=list(kwargs)[0]):
        PrevMarkedTask(**kwargs)


def test_bad_sizes_and_seeds():
    task = PrevMarkedTask()
    with pytest.raises(ValueError, match="batch_size"):
        task.sample(0)
    with pytest.raises(ValueError, match="seed"):
        task.dataset(4, seed=-1)


def test_task_dict_round_trip():
    task = PrevMarkedTask(vocab_size=5, seq_len=7, op="add")
    assert tasks.task_from_dict(json.loads(json.dumps(task.to_dict()))) == task
    with pytest.raises(ValueError, match="unknown task kind"):
        tasks.task_from_dict({"kind": "copy"})


def test_batch_slicing_and_tokens():
    task = PrevMarkedTask(vocab_size=10, seq_len=4)
    b = TaskBatch(torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]]), torch.tensor([[0, 0, 1, 0], [1, 0, 0, 0]]),
                  torch.zeros(2, 4, dtype=torch.long), torch.tensor([2, 0]))
    assert b[1:].input_ids.tolist() == [[5, 6, 7, 8]] and b[1:].marked.tolist() == [0]
    assert task.tokens(b, 0) == ["1", "2", "*3", "4"]
    assert task.tokens(b, 1) == ["*5", "6", "7", "8"]


def test_relation_targets():
    task = PrevMarkedTask(vocab_size=10, seq_len=4)
    b = task.dataset(3, seed=0)
    t = task.relation_targets(b)
    assert t.shape == (3, 2, 4)
    assert t[:, 0].tolist() == [[-1, 0, 1, 2]] * 3
    assert torch.equal(t[:, 1], b.marked[:, None].expand(3, 4))


# ----------------------------------------------------------------------------- specialisation measure
def _one_hot_weights(targets, S):
    """(B, L, S) attention that puts all weight on targets (B, L) (uniform where target = -1)."""
    B, L = targets.shape
    w = torch.full((B, L, S), 1.0 / S)
    rows = targets >= 0
    w[rows] = torch.nn.functional.one_hot(targets[rows], S).float()
    return w


def test_relation_shares_of_specialised_and_blending_heads():
    task = PrevMarkedTask(vocab_size=10, seq_len=6)
    b = task.dataset(40, seed=2)
    t = task.relation_targets(b)  # (B, 2, L)
    prev_head = _one_hot_weights(t[:, 0], 6)
    mark_head = _one_hot_weights(t[:, 1], 6)
    blend = 0.5 * prev_head + 0.5 * mark_head
    w = torch.stack([prev_head, mark_head, blend], dim=1)  # (B, H=3, L, S)
    shares = relation_shares(w, t)
    assert shares.shape == (3, 2)
    # query i = m + 1 has both targets on one key, so a one-relation head also gets that share
    coincide = (t[:, 0] == t[:, 1]).float()[:, 1:].mean()  # over queries with a previous token
    coincide_all = ((t[:, 0] == t[:, 1]).float().sum() / (t[:, 1] >= 0).sum())
    torch.testing.assert_close(shares[0, 0], torch.tensor(1.0))
    torch.testing.assert_close(shares[0, 1], coincide_all + (1 / 6) / 6)  # + the uniform row at i = 0
    torch.testing.assert_close(shares[1, 1], torch.tensor(1.0))
    torch.testing.assert_close(shares[1, 0], coincide)
    torch.testing.assert_close(shares[2], 0.5 * (shares[0] + shares[1]))
    heads, values = best_heads(shares)
    assert heads == [0, 1] and values == pytest.approx([1.0, 1.0])


def test_relation_shares_hand_example():
    # one sequence, L = S = 3, one head; previous targets [-1, 0, 1], marked targets [2, 2, 2]
    w = torch.tensor([[[0.2, 0.3, 0.5], [0.6, 0.1, 0.3], [0.0, 0.9, 0.1]]])[:, None]  # (1, 1, 3, 3)
    t = torch.tensor([[[-1, 0, 1], [2, 2, 2]]])
    shares = relation_shares(w, t)
    assert shares[0, 0].item() == pytest.approx((0.6 + 0.9) / 2)  # query 0 has no previous key
    assert shares[0, 1].item() == pytest.approx((0.5 + 0.3 + 0.1) / 3)


def test_relation_shares_errors():
    w = torch.rand(2, 1, 3, 3)
    with pytest.raises(ValueError, match="weights must be"):
        relation_shares(w[0], torch.zeros(2, 2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="does not match"):
        relation_shares(w, torch.zeros(2, 2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="must lie in"):
        relation_shares(w, torch.full((2, 2, 3), 3))
    with pytest.raises(ValueError, match="shares must be"):
        best_heads(torch.rand(3))


# ----------------------------------------------------------------------------- the registry
def test_registry_specs_are_consistent():
    assert {"ch1-h1", "ch1-h2", "ch1-h4", "ch1-h8"} <= set(tasks.SHIPPED)
    for name, spec in tasks.SHIPPED.items():
        task = spec.make_task()
        config = spec.encoder_config()
        assert spec.name == name
        if isinstance(task, tasks.DigitsTask):  # chapter 7: pixels as patches, [CLS] first, pooled readout
            assert config.patch_dim == task.patch_dim and config.cls_token and spec.pooling == "cls"
            assert config.max_len == 1 + task.grid**2 and len(spec.seeds) >= 5
            continue
        assert config.max_len == task.seq_len
        if isinstance(task, tasks.TranslationTask):  # chapter 6: an encoder-decoder, id 0 pads
            decoder = EncoderConfig(**spec.decoder)
            assert config.vocab_size == decoder.vocab_size == task.num_classes and config.pad_token_id == 0
            assert decoder.is_causal and decoder.cross_attention and not config.cross_attention
            assert len(spec.seeds) >= 3
            continue
        assert config.vocab_size == task.vocab_size
        assert config.pad_token_id is None  # every token id is real and must keep its gradient
        if isinstance(task, tasks.PrevMarkedTask):
            assert config.type_vocab_size == 2  # the mark is a token type
        else:  # chapter 5: a causal language model, no token types
            assert isinstance(task, tasks.InductionTask)
            assert config.type_vocab_size == 0 and config.is_causal and task.num_classes == config.vocab_size
        assert len(spec.seeds) >= 3
        assert tasks.TrainedSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    ch1 = [tasks.SHIPPED[f"ch1-h{h}"] for h in (1, 2, 4, 8)]
    # the comparison is fair: only num_heads differs
    for spec in ch1:
        assert len(spec.seeds) >= 5
        assert spec.model | {"num_heads": 1} == ch1[0].model
        assert (spec.steps, spec.batch_size, spec.lr, spec.task) == (
            ch1[0].steps, ch1[0].batch_size, ch1[0].lr, ch1[0].task)


@pytest.mark.slow
def test_every_shipped_family_has_files_and_loads():
    for name, spec in tasks.SHIPPED.items():
        w_path, m_path = tasks.weight_files(spec)
        assert w_path.is_file() and m_path.is_file(), f"{name}: run `make train`"
        info = tasks.trained_info(name)
        assert info["seeds"] == list(spec.seeds)
        assert len(info["accuracy"]) == len(spec.seeds) == len(info["curves"])
        model = tasks.load_trained(name, spec.seeds[-1])
        assert not model.training
        config = model.source_encoder.config if spec.decoder else model.config
        assert config.num_heads == spec.model["num_heads"]


def test_shipped_weights_are_small():
    # a budget for the wheel: about 1-2 MiB per chapter's models (float16), checkpoints included;
    # 13 MiB since chapter 4's ch4-l3h8 ships 8 seeds (12.05 MiB in all, 2.4 MiB of it ch4-l3h8); 17.5 MiB since
    # chapter 9 ships ten families of 5 seeds (4.3 MiB: its figure and checks read every seed)
    total = sum(p.stat().st_size for p in tasks.WEIGHTS_DIR.glob("*.safetensors"))
    assert total < 17.5 * 2**20, f"shipped weights take {total / 2**20:.1f} MiB"


def test_checkpoints_load_and_differ_from_the_final_weights():
    spec = tasks.SHIPPED["ch5-induction-l2"]
    assert spec.checkpoints[0] == 0 and spec.checkpoints[-1] == spec.steps
    first = tasks.load_trained(spec, step=0)
    last = tasks.load_trained(spec, step=spec.steps)
    final = tasks.load_trained(spec)
    for name, b, c in zip(first.state_dict(), last.state_dict().values(), final.state_dict().values()):
        assert torch.equal(b, c), name  # the last checkpoint is the final model of the first seed
    assert not torch.equal(first.readout.weight, final.readout.weight)
    with pytest.raises(ValueError, match="steps"):
        tasks.load_trained(spec, step=123)
    with pytest.raises(ValueError, match="seed=1"):
        tasks.load_trained(spec, 1, step=0)  # checkpoints exist for the first seed only


def test_load_trained_errors(tmp_path):
    with pytest.raises(ValueError, match="no shipped model named"):
        tasks.load_trained("ch1-h3")
    with pytest.raises(ValueError, match="has no seed"):
        tasks.load_trained("ch1-h1", seed=99)
    with pytest.raises(FileNotFoundError, match="make train"):
        tasks.load_trained("ch1-h1", directory=tmp_path)


def test_shipped_budget_sweep_is_complete_and_valid():
    from collections import Counter

    runs = tasks.budget_sweep()
    at_default_lr = Counter((r["heads"], r["steps"]) for r in runs if r["lr"] == 3e-3)
    budgets = {steps for _, steps in at_default_lr}
    assert {1, 2, 4, 8} == {h for h, _ in at_default_lr} and len(budgets) >= 3 and 8000 in budgets
    assert all(n >= 10 for n in at_default_lr.values()), at_default_lr
    at_2000 = Counter((r["heads"], r["lr"]) for r in runs if r["steps"] == 2000)
    assert {lr for _, lr in at_2000} == {1e-3, 3e-3, 1e-2} and all(n >= 10 for n in at_2000.values())
    for r in runs:
        assert (r["steps_to_solve"] is not None) == r["solved"]
        assert r["steps_to_solve"] is None or r["steps_to_solve"] <= r["steps"]


def test_shipped_records_cover_what_their_chapters_count():
    from collections import Counter

    heads = tasks.shipped_record("ch1_fresh_heads")["runs"]
    per_h = Counter((r["heads"], r["fresh"]) for r in heads)
    assert per_h[4, False] == per_h[8, False] == 5 and per_h[4, True] >= 10 and per_h[8, True] >= 10
    for r in heads:
        assert len(r["shares"]) == r["heads"] and all(len(row) == 2 and all(0 <= v <= 1 for v in row)
                                                        for row in r["shares"])
        assert r["fresh"] == (r["seed"] not in tasks.SHIPPED[f"ch1-h{r['heads']}"].seeds)
    single = tasks.shipped_record("ch2_fresh_seeds")["runs"]
    per_family = Counter((r["family"], r["fresh"]) for r in single)
    for family in ("ch2-tied-h4", "ch2-narrow-h4", "ch1-h1"):
        assert per_family[family, False] == 5 and per_family[family, True] >= 10
        shipped = tasks.trained_info(family)["accuracy"]  # the shipped seeds re-evaluated from their weights
        assert [r["accuracy"] for r in single if r["family"] == family and not r["fresh"]] == pytest.approx(
            shipped, abs=1e-3)
    toy = tasks.shipped_record("ch4_fresh_seeds")["runs"]
    assert sorted(r["seed"] for r in toy) == list(range(8, 16))  # not the shipped seeds 0-7
    for r in toy:
        assert 0 <= r["n_matter_last"] <= r["n_matter"] <= 24 and 0 <= r["fine_tune"]["after"] <= 1
        assert {(g["gate_seed"], g["target_fraction"]) for g in r["gates"]} == {
            (g, f) for g in (0, 1, 2) for f in (0.4, 0.6, 0.81)}
        assert [f for f, _ in r["curves"]["importance"]] == [f for f, _ in r["curves"]["importance, rescored"]]
    budget = tasks.shipped_record("ch7_budget_sweep")["runs"]
    cells = Counter((r["heads"], r["steps"]) for r in budget)
    assert {h for h, _ in cells} == {1, 8} and {s for _, s in cells} >= {600, 1200, 1800}
    assert all(n >= 6 for n in cells.values()), cells
    shipped = tasks.trained_info("ch7-digits-h8")["accuracy"]  # the book's budget reproduces the shipped runs
    assert [r["accuracy"] for r in budget if r["heads"] == 8 and r["steps"] == 600][:5] == pytest.approx(shipped, abs=1e-6)
    ensembles = tasks.shipped_record("ch8_ensemble")["runs"]  # issue 51: 20 ensembles, 10 more fresh joint models
    kinds = Counter(r["kind"] for r in ensembles)
    assert kinds["ensemble"] >= 20 and kinds["joint"] >= 10
    assert all(r["seed"] not in range(15) for r in ensembles if r["kind"] == "joint")  # not chapter 1's seeds
    seeds = [s for r in ensembles if r["kind"] == "ensemble" for s in r["member_seeds"]]
    assert len(set(seeds)) == len(seeds) and min(seeds) >= 1000  # every member on its own unshipped seed
    ch9 = tasks.shipped_record("ch9_fresh_seeds")  # issue 51: every 2,000-step family on ten or more seeds
    cells = Counter((r["family"], r["data"], r["fresh"]) for r in ch9["runs"])
    for family in ("ch5-induction-l2", "ch9-window4", "ch9-window8", "ch9-sparse4", "ch9-latent-rope", "ch9-latent",
                   "ch9-latent64"):
        assert cells[family, "book", False] == 5 and cells[family, "book", True] >= 5, family
        shipped = tasks.trained_info(family)["accuracy"]  # the shipped seeds scored from their weights
        assert [r["accuracy"] for r in ch9["runs"] if r["family"] == family and not r["fresh"]] == pytest.approx(
            shipped, abs=1e-6)
    assert cells["ch9-window8", "within 8", True] >= 5 and cells["ch5-induction-l2", "within 8", True] >= 5
    for r in ch9["runs"]:
        assert len(r["hits"]) == len(r["count"]) == len(ch9["edges"]) - 1 and all(
            0 <= h <= c for h, c in zip(r["hits"], r["count"]))
        assert (r["curve"] is None) == (not r["fresh"]) and (r["cpu_seconds"] > 0) == r["fresh"]


@pytest.mark.parametrize("runs, match", [([], "non-empty"), ([{"seed": -1, "accuracy": 0.5}], "seed"),
                                         ([{"seed": 0, "accuracy": float("nan")}], "accuracy"),
                                         ([{"seed": True, "accuracy": 0.5}], "seed"), ([3], "seed")])
def test_shipped_record_refuses_bad_runs_and_names(tmp_path, runs, match):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"runs": runs}))
    with pytest.raises(ValueError, match=match):
        tasks.shipped_record("ch7_budget_sweep", path)
    with pytest.raises(ValueError, match="unknown record"):
        tasks.shipped_record("../weights/ch1-h1.v1")


def test_budget_sweep_refuses_bad_records(tmp_path):
    import json

    good = {"heads": 1, "seed": 0, "steps": 10, "lr": 0.003, "accuracy": 0.5, "solved": False, "steps_to_solve": None}
    for bad, match in [({**good, "heads": "1"}, "heads='1'"), ({**good, "solved": True}, "disagrees"),
                       (None, "listed twice")]:
        path = tmp_path / "s.json"
        runs = [good, good] if bad is None else [bad]
        path.write_text(json.dumps({"solved_threshold": 0.99, "runs": runs}))
        with pytest.raises(ValueError, match=match):
            tasks.budget_sweep(path)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_accuracy_and_loss_refuse_non_finite_logits_saying_how_many(bad):
    spec = tasks.SHIPPED["ch1-h1"]
    model = tasks.load_trained(spec)
    batch = spec.make_task().dataset(16, seed=0)
    assert 0 <= tasks.accuracy(model, batch) <= 1
    with torch.no_grad():
        model.readout.bias[3] = bad  # class 3's logit at every position
    n = batch.input_ids.numel()
    with pytest.raises(ValueError, match=rf"accuracy: {n} of {n * model.num_classes} logits are non-finite"):
        tasks.accuracy(model, batch)
    with pytest.raises(ValueError, match=rf"per_example_loss: {n} of {n * model.num_classes} logits are non-finite"):
        tasks.per_example_loss(model, batch)
    with pytest.raises(ValueError, match="non-finite"):
        tasks.evaluate(model, spec.make_task(), num_sequences=8)


# ----------------------------------------------------------------- hostile inputs
def test_broken_sweep_records_and_a_bool_seed_are_refused(tmp_path):
    import json

    from mha_lib import tasks

    good = {"heads": 1, "seed": 0, "steps": 10, "lr": 0.003, "accuracy": 0.5, "solved": False, "steps_to_solve": None}
    for bad in ({**good, "accuracy": float("nan")}, {**good, "accuracy": 7.5}, {**good, "steps": 0},
                {**good, "steps_to_solve": "x"}):
        path = tmp_path / "s.json"
        path.write_text(json.dumps({"solved_threshold": 0.99, "runs": [bad]}))
        with pytest.raises(ValueError):
            tasks.budget_sweep(path)
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*64 - 1\] .*got True"):
        tasks.load_trained("ch1-h1", True)


# ----------------------------------------------------------------------------- labels of the loss/accuracy pair
def _probe(pooling="token"):
    from mha_lib.model import TokenClassifier
    torch.manual_seed(0)
    cfg = EncoderConfig(vocab_size=10, d_model=8, num_heads=2, num_layers=2, d_ff=16, max_len=20)
    return TokenClassifier(cfg, 3, pooling=pooling).eval()


IDS = torch.randint(0, 10, (4, 6), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("labels, match", [
    (torch.zeros(4, 1, dtype=torch.long), r"shape \(B, L\) = \(4, 6\).*\(4, 1\)"),  # broadcast: accuracy 3.0
    (torch.zeros(6, dtype=torch.long), r"shape \(B, L\) = \(4, 6\).*\(6,\)"),  # broadcast: 2.0
    (torch.full((4, 6), 7), r"lie in \[0, 3\) or IGNORE_INDEX=-100; got 24 other value\(s\), e.g. \[7\]"),
    (torch.full((4, 6), -5), r"e.g. \[-5\]"),
    (torch.zeros(4, 6), "integer tensor.*torch.float32"),
    (torch.zeros(4, 6, dtype=torch.bool), "integer tensor.*torch.bool"),
])
@pytest.mark.parametrize("fn", [tasks.accuracy, tasks.per_example_loss])
def test_labels_of_the_wrong_shape_dtype_or_range_are_refused(labels, match, fn):
    with pytest.raises(ValueError, match=fn.__name__ + ": labels must .*" + match):
        fn(_probe(), (IDS, labels))


def test_ignored_positions_still_count_as_labels_and_pooled_labels_are_one_per_sequence():
    labels = torch.zeros(4, 6, dtype=torch.long)
    labels[:, 0] = IGNORE_INDEX
    assert 0.0 <= tasks.accuracy(_probe(), (IDS, labels)) <= 1.0
    pooled = _probe("cls")
    assert tasks.per_example_loss(pooled, (IDS, torch.tensor([0, 1, 2, 0]))).shape == (4,)
    with pytest.raises(ValueError, match=r"lie in \[0, 3\);"):  # no ignore index for one label per sequence
        tasks.accuracy(pooled, (IDS, torch.tensor([0, 1, 2, IGNORE_INDEX])))
    with pytest.raises(ValueError, match=r"shape \(B,\) = \(4,\)"):
        tasks.accuracy(pooled, (IDS, labels))


@pytest.mark.parametrize("batch_size", [0, -1, 1.5])
def test_accuracy_batch_size_is_checked(batch_size):
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        tasks.accuracy(_probe(), PrevMarkedTask(vocab_size=10).dataset(4, seed=0), batch_size=batch_size)
