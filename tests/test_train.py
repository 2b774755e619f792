"""The training loop, the checkpoint cache, the shipped weights, and retraining one shipped model."""
from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
import torch

from mha_lib import tasks, train
from mha_lib.tasks import SHIPPED, PrevMarkedTask

# A tiny recipe for fast tests: 40 steps of a 1-layer, 2-head model.
TINY = replace(SHIPPED["ch1-h2"], name="tiny", steps=40, eval_every=20, eval_sequences=32, seeds=(0, 1))

# The retraining test retrains this shipped family's first seed. It is one of the cheapest
# configurations (one layer), and one whose shipped seed learned the task, so that a broken
# trainer (which leaves a model at the one-relation ceiling of about 0.18) cannot pass.
RETRAIN_NAME = "ch1-h4"
# Same code, same torch, one thread: on the machine that made the shipped files the retrained
# accuracy equals the recorded float32 one exactly. Another CPU rounds differently, and rounding
# differences grow during training; 0.02 (about 600 of the 30720 evaluated positions) allows
# for that while still failing on a run that does not learn the task.
RETRAIN_TOLERANCE = 0.02


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_lr_schedule():
    steps, lr = 100, 1e-3
    values = [train.lr_at(s, steps, lr, 0.1) for s in range(steps)]
    assert values[0] == pytest.approx(lr / 10)  # warm-up starts at lr / steps_w
    assert values[9] == pytest.approx(lr) and max(values) == pytest.approx(lr)
    assert all(a <= b for a, b in zip(values[:10], values[1:10]))  # rising
    assert all(a >= b for a, b in zip(values[10:], values[11:]))  # then falling
    assert values[-1] < 0.001 * lr


@pytest.mark.parametrize(
    "kwargs, match",
    [(dict(steps=0), "steps"), (dict(batch_size=1.5), "batch_size"), (dict(lr=0.0), "lr"),
     (dict(lr=float("nan")), "lr"), (dict(warmup=1.0), "warmup"), (dict(eval_every=0), "eval_every"),
     # beyond float32 (Adam's first step lr / (1 - beta1) too): a ValueError, not a bare RuntimeError
     (dict(lr=1e38), r"lr must be in \[.*3\.4\d*e\+37\]"), (dict(lr=1e39), "lr must be a float32"),
     (dict(lr=1e-3, weight_decay=1e42), "weight_decay")],
)
def test_train_rejects_bad_arguments(kwargs, match):
    task = PrevMarkedTask(vocab_size=8)
    args = dict(steps=2, batch_size=2, lr=1e-3) | kwargs
    with pytest.raises(ValueError, match=match):
        train.train(TINY.build(), task, device="cpu", progress=False, **args)


@pytest.mark.parametrize("spec", ["ch9", None, 3])
def test_train_spec_unknown_name_is_a_clear_value_error(spec, tmp_path):
    """train_spec("ch9", 0) used to raise a bare KeyError('ch9')."""
    with pytest.raises(ValueError, match=r"no shipped model named .*; known: \[") as info:
        train.train_spec(spec, 0, cache_dir=tmp_path, progress=False)
    assert repr(spec) in str(info.value) and "'ch1-h4'" in str(info.value)
    assert not any(tmp_path.iterdir())  # failed before anything was written


@pytest.mark.parametrize("steps", [1, 3])
def test_a_diverging_run_stops_naming_the_step_never_returns_a_nan_model(steps):
    """lr=1e30: the first update leaves huge weights whose logits overflow. With one step no later
    loss sees it; the run used to return that model with accuracy 0.18 (the arg-max of NaN)."""
    torch.manual_seed(0)
    with pytest.raises(ValueError, match=r"training stopped at step 0 \(lr=1e\+30\): .*logits are non-finite"):
        train.train(TINY.build(), TINY.make_task(), steps=steps, batch_size=4, lr=1e30, eval_every=1,
                    eval_sequences=8, device="cpu", progress=False)


def test_an_update_that_leaves_nan_in_the_weights_stops_naming_the_step_and_tensor(monkeypatch):
    model = TINY.build()
    real_step = torch.optim.AdamW.step

    def poisoned(self, *args, **kwargs):  # an optimiser step that overflows one weight
        out = real_step(self, *args, **kwargs)
        with torch.no_grad():
            model.encoder.blocks[0].attn.q_proj.weight[0, 0] = float("nan")
        return out

    monkeypatch.setattr(torch.optim.AdamW, "step", poisoned)
    with pytest.raises(ValueError, match=r"at step 0 .*NaN or inf in \['encoder\.blocks\.0\.attn\.q_proj\.weight'\]"):
        train.train(model, TINY.make_task(), steps=1, batch_size=2, lr=1e-3, eval_sequences=4, device="cpu",
                    progress=False)


def test_train_rejects_wrong_number_of_classes():
    with pytest.raises(ValueError, match="num_classes"):
        train.train(TINY.build(), PrevMarkedTask(vocab_size=5), steps=1, batch_size=2, lr=1e-3, device="cpu",
                    progress=False)


@pytest.mark.slow
def test_training_lowers_the_loss_and_records_a_curve(one_thread):
    result = train.train_spec(replace(TINY, steps=120, eval_every=40), 0, device="cpu", progress=False,
                              cache_dir=False)
    curve = result.curve
    assert curve["steps"] == [40, 80, 120]
    assert len(curve["loss"]) == len(curve["accuracy"]) == 3
    assert curve["loss"][-1] < math.log(8)  # below the loss of a uniform guess over 8 classes
    assert 0.0 <= result.accuracy <= 1.0 and result.seconds > 0 and result.cpu_seconds > 0
    assert not result.model.training


@pytest.mark.slow
def test_same_seed_same_weights_other_seed_other_weights(one_thread):
    a = train.train_spec(TINY, 0, device="cpu", progress=False, cache_dir=False).model.state_dict()
    b = train.train_spec(TINY, 0, device="cpu", progress=False, cache_dir=False).model.state_dict()
    c = train.train_spec(TINY, 1, device="cpu", progress=False, cache_dir=False).model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["readout.weight"], c["readout.weight"])


@pytest.mark.slow
def test_checkpoint_cache(tmp_path, one_thread):
    first = train.train_spec(TINY, 0, device="cpu", progress=False, cache_dir=tmp_path)
    assert not first.cached and len(list(tmp_path.glob("*.safetensors"))) == 1
    second = train.train_spec(TINY, 0, device="cpu", progress=False, cache_dir=tmp_path)
    assert second.cached and second.curve == first.curve and second.accuracy == first.accuracy
    assert all(torch.equal(v, second.model.state_dict()[k]) for k, v in first.model.state_dict().items())
    # another recipe is another cache entry
    third = train.train_spec(TINY, 0, device="cpu", progress=False, cache_dir=tmp_path, steps=20)
    assert not third.cached and len(list(tmp_path.glob("*.safetensors"))) == 2


@pytest.mark.slow
def test_save_and_load_round_trip(tmp_path, one_thread):
    results = [train.train_spec(TINY, s, device="cpu", progress=False, cache_dir=False) for s in TINY.seeds]
    meta = train.save_trained(TINY, results, tmp_path)
    w_path, m_path = tasks.weight_files(TINY, tmp_path)
    assert w_path.is_file() and json.loads(m_path.read_text())["seeds"] == [0, 1]
    for seed, recorded in zip(TINY.seeds, meta["accuracy"]):
        model = tasks.load_trained(TINY, seed, directory=tmp_path)
        assert tasks.evaluate(model, TINY.make_task()) == recorded  # the float16 weights, exactly
    with pytest.raises(ValueError, match="seeds"):
        train.save_trained(TINY, results[:1], tmp_path)
    stale = replace(TINY, lr=1e-4)  # same name and version, other recipe: refused, not loaded
    with pytest.raises(ValueError, match="different spec"):
        tasks.load_trained(stale, 0, directory=tmp_path)


@pytest.mark.slow
def test_shipped_weights_reproduce_their_recorded_accuracy(one_thread):
    # Every shipped model, evaluated now, gives the accuracy recorded when it was saved. The
    # tolerance covers a few argmax ties that another CPU may break the other way.
    for name, spec in SHIPPED.items():
        info = tasks.trained_info(name)
        for seed, recorded in zip(info["seeds"], info["accuracy"]):
            model = tasks.load_trained(name, seed)
            assert tasks.evaluate(model, spec.make_task()) == pytest.approx(recorded, abs=1e-3), (name, seed)


@pytest.mark.slow
def test_retraining_reproduces_the_shipped_accuracy(one_thread):
    spec = SHIPPED[RETRAIN_NAME]
    seed = spec.seeds[0]
    info = tasks.trained_info(spec)
    shipped = info["accuracy_float32"][0]
    assert shipped > 0.9, "the retraining test needs a shipped seed that learned the task"
    result = train.train_spec(spec, seed, device="cpu", progress=False, cache_dir=False)
    assert abs(result.accuracy - shipped) <= RETRAIN_TOLERANCE, (result.accuracy, shipped)
    # and the curve has the recorded length and ends where the recorded one ends
    assert result.curve["steps"] == info["curves"][0]["steps"]


def test_make_train_has_one_target_per_family_covering_the_registry():
    import re
    from pathlib import Path

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    families = set()
    for _target, names in re.findall(r"^(train-ch\d)+: venv\n\t\$\(TRAIN\) (.+)$", makefile, re.M):
        families |= set(names.split())
    assert families == set(SHIPPED)
    assert "train-ch1-budget" in makefile and "scripts/train_ch1_budget.py" in makefile


def test_make_train_reruns_every_shipped_record():
    import re
    from pathlib import Path

    from mha_lib.tasks import RECORDS

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    train_line = re.search(r"^train: (.+?)(?<!\\)\n", makefile, re.M | re.S).group(1)
    for script in RECORDS.values():  # the script exists, a target runs it, and `make train` runs the target
        assert (Path(__file__).resolve().parents[1] / script).is_file(), script
        target = re.search(r"^(train-[\w-]+): venv\n\t\$\(BIN\)/python " + re.escape(script) + "$", makefile, re.M)
        assert target, f"no make target runs {script}"
        assert target.group(1) in train_line.split(), f"make train does not run {target.group(1)}"


@pytest.mark.slow
def test_checkpoints_and_curve_scores_survive_the_cache(tmp_path):
    from dataclasses import replace

    from mha_lib.tasks import SHIPPED
    from mha_lib.train import train_spec

    spec = replace(SHIPPED["ch5-induction-l2"], steps=6, eval_every=3, checkpoints=(0, 3, 6), batch_size=8,
                   eval_sequences=16)
    fresh = train_spec(spec, 0, progress=False, cache_dir=tmp_path, device="cpu")
    assert sorted(fresh.checkpoints) == [0, 3, 6]
    assert len(fresh.curve["induction"]) == 2 and len(fresh.curve["induction"][0]) == 2  # 2 points, 2 layers
    for key, value in fresh.model.state_dict().items():
        assert torch.equal(fresh.checkpoints[6][key], value.float().cpu())
    assert not torch.equal(fresh.checkpoints[0]["readout.weight"], fresh.checkpoints[6]["readout.weight"])
    cached = train_spec(spec, 0, progress=False, cache_dir=tmp_path, device="cpu")
    assert cached.cached and sorted(cached.checkpoints) == [0, 3, 6]
    for n in (0, 3, 6):
        for key, value in fresh.checkpoints[n].items():
            assert torch.equal(cached.checkpoints[n][key], value)
    assert cached.curve == fresh.curve
    other_seed = train_spec(spec, 1, progress=False, cache_dir=False, device="cpu")
    assert other_seed.checkpoints == {}  # only the first seed keeps checkpoints


def test_checkpoint_steps_are_checked():
    from mha_lib.tasks import InductionTask
    from mha_lib.model import EncoderConfig, TokenClassifier
    from mha_lib.train import train

    task = InductionTask(vocab_size=8, seq_len=8, repeat_lengths=(2,))
    model = TokenClassifier(EncoderConfig(vocab_size=8, d_model=8, num_heads=2, num_layers=1, d_ff=0, max_len=8,
                                          is_causal=True, pad_token_id=None), 8)
    with pytest.raises(ValueError, match="checkpoint_steps"):
        train(model, task, steps=3, batch_size=2, lr=1e-3, checkpoint_steps=[4], progress=False)
    with pytest.raises(ValueError, match="checkpoint_steps"):
        train(model, task, steps=3, batch_size=2, lr=1e-3, checkpoint_steps=[1.5], progress=False)


# ----------------------------------------------------------------- hostile inputs
def test_a_broken_cache_entry_is_retrained_with_a_warning(tmp_path):
    spec = replace(SHIPPED["ch1-h2"], name="tiny", steps=2, eval_every=1, eval_sequences=4, seeds=(0,))
    train.train_spec(spec, 0, device="cpu", progress=False, cache_dir=tmp_path)
    meta = next(tmp_path.glob("*.json"))
    meta.write_text('{"curve": null, "accuracy": "high", "seconds": NaN}')
    with pytest.warns(UserWarning, match="broken cache entry"):
        assert not train.train_spec(spec, 0, device="cpu", progress=False, cache_dir=tmp_path).cached
