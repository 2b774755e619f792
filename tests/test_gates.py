"""Tests for mha_lib.pruning's Hard-Concrete head gates (Louizos et al. 2018; Voita et al. 2019)."""
import copy
import math

import pytest
import torch

from mha_lib import pruning as P
from mha_lib import tasks
from mha_lib.model import EncoderConfig, TokenClassifier

pytestmark = pytest.mark.usefixtures("single_thread")

TINY = dict(vocab_size=17, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=10)
STEPS = dict(steps=120, lr=0.1)  # enough for the toy model's gates to settle (they start open)


def tiny(seed=0):
    torch.manual_seed(seed)
    return TokenClassifier(EncoderConfig(**TINY), 3).eval()


def tiny_batches(B=4, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(1, TINY["vocab_size"], (B, 6), generator=g), torch.randint(0, 3, (B, 6), generator=g))]


@pytest.fixture(scope="module")
def toy():
    """A model whose heads matter: the shipped 3 x 8-head model of chapter 4 (accuracy 1.0), seed 0,
    and 256 scoring sequences in batches of 32."""
    torch.set_num_threads(1)
    model = tasks.load_trained("ch4-l3h8", 0)
    data = tasks.SHIPPED["ch4-l3h8"].make_task().dataset(256, seed=1)
    return model, [data[i:i + 32] for i in range(0, 256, 32)]


@pytest.fixture(scope="module")
def gate_sweep(toy):
    """Pruned head count of the trained gates at a range of penalties (one gate seed)."""
    model, batches = toy
    penalties = [0.0, 1e-3, 1e-2, 1e-1, 1.0, 10.0]
    return {p: P.train_head_gates(model, batches, tasks.per_example_loss, p, seed=0, **STEPS) for p in penalties}


# ----------------------------------------------------------------------------- the distribution
def test_closed_probability_matches_samples_and_the_formula():
    """P(z != 0) = sigmoid(log_alpha - beta log(-l/r)) (Louizos et al. eq. 12), checked by sampling."""
    gates = P.HardConcreteGates(1, 5)
    with torch.no_grad():
        gates.log_alpha.copy_(torch.tensor([[-4.0, -1.0, 0.0, 1.5, 4.0]]))
    z = gates.sample(40_000, torch.Generator().manual_seed(0))  # (1, B, 5)
    assert z.shape == (1, 40_000, 5) and bool(((z >= 0) & (z <= 1)).all())
    open_share = (z != 0).float().mean(1)[0]  # (5,)
    expected = torch.sigmoid(gates.log_alpha.detach()[0] - (2 / 3) * math.log(0.1 / 1.1))
    torch.testing.assert_close(gates.p_open().detach()[0], expected)
    # 4 standard errors of a proportion from 40000 draws
    tol = 4 * torch.sqrt(expected * (1 - expected) / 40_000) + 1e-4
    assert bool(((open_share - expected).abs() < tol).all()), (open_share, expected)
    # the gate is exactly 1 with positive probability too: the stretch past 1 is clipped
    assert bool((z == 1).any()) and bool((z == 0).any())
    torch.testing.assert_close(gates.expected_l0(), expected.sum())


def test_deterministic_gates_lie_in_0_1_and_follow_eq_13():
    gates = P.HardConcreteGates(2, 3)
    with torch.no_grad():
        gates.log_alpha.copy_(torch.tensor([[-10.0, math.log(1 / 11) - 1e-3, math.log(1 / 11) + 0.5],
                                            [0.0, math.log(11) + 1e-3, 10.0]]))
    z = gates.deterministic()
    assert bool(((z >= 0) & (z <= 1)).all())
    # sigmoid(log(1/11)) = 1/12: 1/12 * 1.2 - 0.1 = 0 is the edge where a gate closes; sigmoid(log 11) = 11/12 -> 1
    assert z[0, 0] == 0 and z[0, 1] == 0 and 0 < z[0, 2] < 1
    assert z[1, 0] == pytest.approx(0.5 * 1.2 - 0.1) and z[1, 1] == 1 and z[1, 2] == 1
    assert gates.mask().tolist() == [[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]]
    assert gates.num_pruned == 2 and gates.fraction_pruned == pytest.approx(2 / 6)


def test_heads_that_do_not_exist_stay_closed_and_do_not_count():
    exists = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    gates = P.HardConcreteGates(2, 2, exists=exists, init_log_alpha=5.0)
    assert gates.sample(8)[0, :, 1].eq(0).all() and gates.deterministic()[0, 1] == 0
    assert gates.expected_l0().item() == pytest.approx(3 * gates.p_open()[0, 0].item())
    model = tiny()
    P.prune_heads(model, {0: [1]})
    trained = P.train_head_gates(model, tiny_batches(), tasks.per_example_loss, 0.0, steps=3)
    assert trained.exists.tolist() == P.kept_mask(model).tolist() and trained.mask()[0, 1] == 0


def test_samples_are_reproducible_with_a_generator_and_differentiable():
    gates = P.HardConcreteGates(2, 4, init_log_alpha=0.0)
    a = gates.sample(3, torch.Generator().manual_seed(5))
    b = gates.sample(3, torch.Generator().manual_seed(5))
    assert torch.equal(a, b) and a.shape == (2, 3, 4)
    assert gates.sample().shape == (2, 4)
    a.sum().backward()
    assert gates.log_alpha.grad is not None and bool(gates.log_alpha.grad.abs().sum() > 0)


# ----------------------------------------------------------------------------- training
def test_no_penalty_keeps_every_head_and_a_large_one_closes_all(gate_sweep):
    assert gate_sweep[0.0].num_pruned == 0
    assert gate_sweep[10.0].num_pruned == 24  # 10 nats per open head: nothing is worth that much


def test_pruned_count_follows_the_penalty(gate_sweep):
    """More penalty, more heads pruned: monotone up to one head (the gates are stochastic)."""
    counts = [g.num_pruned for _, g in sorted(gate_sweep.items())]
    assert all(later >= earlier - 1 for earlier, later in zip(counts, counts[1:])), counts
    assert counts[0] < counts[2] < counts[-1], counts  # and it really moves, in steps
    assert len(set(counts)) >= 4, counts


@pytest.mark.slow
def test_more_pruning_costs_accuracy_and_the_penalty_is_what_closes_heads(toy, gate_sweep):
    model, _ = toy
    test = tasks.SHIPPED["ch4-l3h8"].make_task().dataset(512, seed=tasks.EVAL_SEED)
    acc = {p: tasks.accuracy(model, test, P.layer_head_masks(model, g.mask())) for p, g in gate_sweep.items()}
    assert acc[0.0] == tasks.accuracy(model, test) and acc[10.0] < 0.5 < acc[1e-2]
    # the expected L0 falls over training under a penalty, and stays near 24 without one
    assert gate_sweep[1e-1].history["expected_l0"][-1] < gate_sweep[1e-1].history["expected_l0"][0] - 5
    assert gate_sweep[0.0].history["expected_l0"][-1] > 20


@pytest.mark.parametrize("penalty", [1e30, 3e38])
def test_a_huge_penalty_closes_every_head_instead_of_overflowing_adam(penalty):
    """A penalty of 1e30 pruned 0 of 8 heads (Adam's squared gradient overflowed float32, so its
    steps were 0) while 1.0 pruned all 8 (hardening 3, item 5). Larger penalties prune as much."""
    model = tiny()
    gates = P.train_head_gates(model, tiny_batches(), tasks.per_example_loss, penalty, seed=0, **STEPS)
    assert gates.num_pruned == 8
    assert all(math.isfinite(v) for v in gates.history["expected_l0"] + gates.history["loss"])
    assert all(bool(torch.isfinite(p).all()) for p in gates.parameters())


def test_training_leaves_the_model_untouched():
    model = tiny()
    model.train()
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    next(model.parameters()).requires_grad_(False)  # a mixed pattern must come back as it was
    flags[next(iter(flags))] = False
    before = copy.deepcopy(model.state_dict())
    gates = P.train_head_gates(model, tiny_batches(), tasks.per_example_loss, 0.05, steps=5)
    assert model.training
    assert {n: p.requires_grad for n, p in model.named_parameters()} == flags
    assert all(p.grad is None for p in model.parameters())
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert len(gates.history["loss"]) == 5 and not gates.training


def test_same_seed_same_gates_other_seed_other_noise():
    model = tiny()
    a = P.train_head_gates(model, tiny_batches(), tasks.per_example_loss, 0.05, steps=10, seed=3)
    b = P.train_head_gates(model, tiny_batches(), tasks.per_example_loss, 0.05, steps=10, seed=3)
    c = P.train_head_gates(model, tiny_batches(), tasks.per_example_loss, 0.05, steps=10, seed=4)
    assert torch.equal(a.log_alpha, b.log_alpha) and not torch.equal(a.log_alpha, c.log_alpha)


@pytest.mark.slow
def test_bisection_reaches_the_target_count(toy):
    model, batches = toy
    found = P.gates_for_fractions(model, batches, tasks.per_example_loss, [0.5, 0.25], penalty_range=(1e-4, 10.0),
                                  tolerance=1, seed=0, **STEPS)
    assert [r.target_pruned for r in found] == [12, 6]
    for r in found:
        assert abs(r.num_pruned - r.target_pruned) <= 1, r.trials
        assert r.num_pruned == r.gates.num_pruned and r.fraction_pruned == r.num_pruned / 24
        assert (r.penalty, r.num_pruned) in r.trials and r.mask.sum() == 24 - r.num_pruned
    assert found[1].penalty < found[0].penalty  # fewer heads pruned with less penalty
    assert found[0].trials == found[1].trials  # the runs are shared between targets
    one = P.gates_for_fraction(model, batches, tasks.per_example_loss, 0.0, penalty_range=(1e-6, 1e-5), max_trials=1,
                               seed=0, steps=20)
    assert one.target_pruned == 0 and one.num_pruned == 0


# ----------------------------------------------------------------------------- bad arguments
@pytest.mark.parametrize("kwargs, match", [
    (dict(num_layers=0, num_heads=2), "num_layers"),
    (dict(num_layers=2, num_heads=2.0), "num_heads"),
    (dict(num_layers=2, num_heads=2, temperature=0.0), "temperature"),
    (dict(num_layers=2, num_heads=2, limits=(0.0, 1.1)), "limits"),
    (dict(num_layers=2, num_heads=2, limits=(-0.1, 1.0)), "limits"),
    (dict(num_layers=2, num_heads=2, limits=(-0.1,)), "limits"),
    (dict(num_layers=2, num_heads=2, init_log_alpha=float("nan")), "init_log_alpha"),
    (dict(num_layers=2, num_heads=2, init_log_alpha=1e39), "init_log_alpha must be a float32"),
    (dict(num_layers=2, num_heads=2, temperature=1e-46), r"temperature must be a float32-representable number in \[1\.1755e-38"),
    (dict(num_layers=2, num_heads=2, exists=torch.ones(3, 2)), "exists"),
    (dict(num_layers=2, num_heads=2, exists=torch.full((2, 2), float("nan"))), "exists must hold only 0/1"),
    (dict(num_layers=2, num_heads=2, exists=torch.full((2, 2), 0.5)), r"exists must hold only 0/1.*0\.5"),
])
def test_gate_module_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        P.HardConcreteGates(**kwargs)


def test_sample_bad_batch_size():
    with pytest.raises(ValueError, match="batch_size"):
        P.HardConcreteGates(1, 2).sample(0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(penalty=-0.1), "penalty must be >= 0, got -0.1"),
    (dict(penalty=float("inf")), "penalty"),
    (dict(penalty=True), "penalty"),
    (dict(steps=0), "steps"),
    (dict(lr=0.0), "lr"),
    (dict(lr=2e38), r"lr must be in \["),  # Adam's first step 2e39 overflows float32
    (dict(lr=1e39), "lr must be a float32"),
    (dict(init_log_alpha=1e39), "init_log_alpha must be a float32-representable"),
    (dict(seed=-1), "seed"),
    (dict(batches=[]), "non-empty list"),
    (dict(batches=iter(tiny_batches())), "non-empty list"),
    (dict(loss_fn=lambda m, b, g: tasks.per_example_loss(m, b, g).mean()), r"shape \(B,\) = \(4,\)"),
    (dict(loss_fn=lambda m, b, g: tasks.per_example_loss(m, b, g) * float("nan")), "non-finite"),
])
def test_train_head_gates_bad_arguments(kwargs, match):
    args = dict(batches=tiny_batches(), loss_fn=tasks.per_example_loss, penalty=0.1, steps=2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        P.train_head_gates(tiny(), args.pop("batches"), args.pop("loss_fn"), args.pop("penalty"), **args)


def _nan_gradient_loss(m, b, g):
    loss = tasks.per_example_loss(m, b, g)
    return loss + 0 * torch.sqrt(loss - loss)  # finite value, NaN gradient (d sqrt(x)/dx at 0)


@pytest.mark.parametrize("steps", [1, 3])
def test_a_nan_gradient_stops_gate_training_naming_the_step_never_nan_gates(steps):
    with pytest.raises(ValueError, match=r"stopped at step 0: the gradient of the objective holds \d+ NaN"):
        P.train_head_gates(tiny(), tiny_batches(), _nan_gradient_loss, 0.1, steps=steps)


def test_exists_accepts_bool_and_0_1():
    g = P.HardConcreteGates(1, 2, exists=torch.tensor([[True, False]]))
    assert g.exists.tolist() == [[1.0, 0.0]] and g.num_pruned == 1


@pytest.mark.parametrize("kwargs, match", [
    (dict(fractions=[1.5]), r"in \[0, 1\], got 1.5"),
    (dict(fractions=[]), "non-empty"),
    (dict(fractions=0.5), "non-empty"),
    (dict(penalty_range=(1.0, 0.1)), "low < high"),
    (dict(penalty_range=(0.0, 1.0)), "penalty_range"),
    (dict(max_trials=0), "max_trials"),
    (dict(tolerance=-1), "tolerance"),
])
def test_gates_for_fractions_bad_arguments(kwargs, match):
    args = dict(fractions=[0.5], steps=2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        P.gates_for_fractions(tiny(), tiny_batches(), tasks.per_example_loss, args.pop("fractions"), **args)


# ----------------------------------------------------------------------------- the shipped gates
GATES_FILE = tasks.WEIGHTS_DIR.parent / "data" / "ch4_gates.json"


@pytest.fixture(scope="module")
def shipped_gates():
    import json

    return json.loads(GATES_FILE.read_text(encoding="utf-8"))


def test_shipped_gates_cover_every_seed_and_target(shipped_gates):
    data = shipped_gates
    toy = [r for r in data["runs"] if r["model"] == "ch4-l3h8"]
    bert = [r for r in data["runs"] if r["model"] == "all-MiniLM-L6-v2"]
    seeds = tasks.SHIPPED["ch4-l3h8"].seeds
    assert sorted({(r["model_seed"], r["gate_seed"], r["target_fraction"]) for r in toy}) == sorted(
        (s, g, f) for s in seeds for g in data["gate_seeds"] for f in data["fractions"])
    assert sorted({(r["gate_seed"], r["target_fraction"]) for r in bert}) == sorted(
        (g, f) for g in data["gate_seeds"] for f in data["fractions"])
    assert len(toy) + len(bert) == len(data["runs"])


def test_shipped_gates_are_consistent(shipped_gates):
    tolerance = shipped_gates["recipe"]["gates"]["tolerance"]
    for r in shipped_gates["runs"]:
        mask, gates = torch.tensor(r["mask"]), torch.tensor(r["gates"])
        n = mask.numel()
        assert mask.shape == gates.shape == ((3, 8) if r["model"] == "ch4-l3h8" else (6, 12))
        assert set(mask.unique().tolist()) <= {0, 1} and bool(((gates >= 0) & (gates <= 1)).all())
        assert torch.equal(gates == 0, mask == 0)  # pruned exactly where the test-time gate is 0
        assert int((mask == 0).sum()) == r["num_pruned"] and r["fraction_pruned"] == r["num_pruned"] / n
        assert r["target_pruned"] == math.floor(r["target_fraction"] * n + 0.5)
        assert abs(r["num_pruned"] - r["target_pruned"]) <= tolerance, r  # what the chapter's tables rely on
        assert [r["penalty"], r["num_pruned"]] in r["trials"] and r["penalty"] > 0


@pytest.mark.slow
def test_a_shipped_toy_gate_run_reproduces(shipped_gates):
    """The first toy record, retrained from its recipe: the same pruned count (one head of slack for
    another CPU's rounding)."""
    recipe, common = shipped_gates["recipe"]["toy"], shipped_gates["recipe"]["gates"]
    r = next(r for r in shipped_gates["runs"] if r["model"] == "ch4-l3h8")
    model = tasks.load_trained("ch4-l3h8", r["model_seed"])
    data = tasks.SHIPPED["ch4-l3h8"].make_task().dataset(512, seed=1)
    batches = [data[i:i + recipe["batch"]] for i in range(0, 512, recipe["batch"])]
    gates = P.train_head_gates(model, batches, tasks.per_example_loss, r["penalty"], steps=recipe["steps"],
                               lr=recipe["lr"], seed=r["gate_seed"], temperature=common["temperature"],
                               limits=tuple(common["limits"]), init_log_alpha=common["init_log_alpha"])
    assert abs(gates.num_pruned - r["num_pruned"]) <= 1
