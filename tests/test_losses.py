"""capsim.losses against loop-based NumPy references on hand-made arrays."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from capsim import losses

TOL = 1e-5

# A 4x4 similarity matrix where captions 0 and 1 describe the same image.
SIM = np.array(
    [
        [0.90, 0.85, -0.10, 0.30],
        [0.70, 0.60, 0.95, -0.40],
        [0.60, -0.30, 0.50, 0.45],
        [0.10, 0.82, 0.05, 0.75],
    ],
    np.float32,
)
IMAGE_OF_ROW = np.array([0, 0, 1, 2])
POSITIVE = IMAGE_OF_ROW[:, None] == IMAGE_OF_ROW[None, :]
# perm[0] = 1 lands on a same-image pair; the other rows get true negatives.
PERM = np.array([1, 3, 0, 2], np.int32)

X = np.array([0.3, -1.2, 2.5, 0.7, 0.0, 1.1], np.float32)
Y = np.array([1.0, -0.5, 2.0, 0.2, 0.4, -1.0], np.float32)


def np_pearson(x, y):
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / n
    vx = sum((a - mx) ** 2 for a in x) / n
    vy = sum((b - my) ** 2 for b in y) / n
    return cov / (math.sqrt(vx) * math.sqrt(vy))


def np_covariance(x, y):
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    return sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / n


def np_kendall_surrogate(x, y, alpha):
    pairs = list(itertools.combinations(range(len(x)), 2))
    return sum(math.tanh(alpha * (x[i] - x[j]) * (y[i] - y[j])) for i, j in pairs) / len(pairs)


def np_margin(sim, negative, margin, reduction):
    b, c = sim.shape
    hinges = [
        [max(0.0, margin - (1.0 - sim[i, j])) for j in range(c) if negative[i, j]] for i in range(b)
    ]
    if reduction == "mean":
        flat = [h for row in hinges for h in row]
        return sum(flat) / len(flat) if flat else 0.0
    hardest = [max(row) for row in hinges if row]
    return sum(hardest) / len(hardest) if hardest else 0.0


def np_rank(sim, positive, margin):
    b = sim.shape[0]
    total = 0.0
    for i in range(b):
        for k in range(b):
            if not positive[i, k]:
                total += max(0.0, margin - sim[i, i] + sim[i, k])
            if not positive[k, i]:
                total += max(0.0, margin - sim[i, i] + sim[k, i])
    return total / b


def np_infonce_rows(logits, positive):
    losses_per_row = []
    for i in range(logits.shape[0]):
        cols = [j for j in range(logits.shape[1]) if positive[i, j]]
        if not cols:
            continue
        log_z = math.log(sum(math.exp(v) for v in logits[i]))
        losses_per_row.append(-sum(logits[i, j] - log_z for j in cols) / len(cols))
    return sum(losses_per_row) / len(losses_per_row)


def np_infonce(sim, positive, temperature):
    logits = sim.astype(np.float64) / temperature
    return 0.5 * (np_infonce_rows(logits, positive) + np_infonce_rows(logits.T, positive.T))


def np_pairs(sim, positive, perm):
    b = sim.shape[0]
    x = [sim[i, i] for i in range(b)] + [sim[i, perm[i]] for i in range(b)]
    y = [1.0] * b + [1.0 if positive[i, perm[i]] else -1.0 for i in range(b)]
    return np.array(x), np.array(y)


def test_cosine_similarity_matrix_matches_numpy_and_zero_rows_give_zero():
    a = np.array([[1.0, 2.0, 2.0], [0.0, 0.0, 0.0], [-3.0, 0.0, 4.0]], np.float32)
    b = np.array([[0.0, 1.0, 0.0], [2.0, -1.0, 2.0]], np.float32)
    expected = np.zeros((3, 2))
    for i in range(3):
        for j in range(2):
            na, nb = np.linalg.norm(a[i]), np.linalg.norm(b[j])
            expected[i, j] = 0.0 if na == 0 else a[i] @ b[j] / (na * nb)
    got = losses.cosine_similarity_matrix(a, b)
    assert got.shape == (3, 2) and got.dtype == jnp.float32
    np.testing.assert_allclose(got, expected, atol=TOL)
    grad = jax.grad(lambda a: losses.cosine_similarity_matrix(a, b).sum())(jnp.asarray(a))
    assert np.all(np.isfinite(grad))


def test_pearson_and_covariance_match_numpy():
    np.testing.assert_allclose(losses.pearson_correlation(X, Y), np_pearson(X, Y), atol=TOL)
    np.testing.assert_allclose(losses.pearson_loss(X, Y), -np_pearson(X, Y), atol=TOL)
    np.testing.assert_allclose(losses.covariance_loss(X, Y), -np_covariance(X, Y), atol=TOL)


def test_pearson_of_constant_vector_is_zero_with_finite_gradient():
    x = jnp.full((5,), 0.5, jnp.float32)
    y = jnp.array([1.0, -1.0, 1.0, 1.0, -1.0], jnp.float32)
    assert float(losses.pearson_loss(x, y)) == pytest.approx(0.0, abs=TOL)
    grad_x, grad_y = jax.grad(losses.pearson_loss, argnums=(0, 1))(x, y)
    assert np.all(np.isfinite(grad_x)) and np.all(np.isfinite(grad_y))


@pytest.mark.parametrize("alpha", [0.5, 3.0])
def test_kendall_surrogate_matches_numpy(alpha):
    expected = np_kendall_surrogate(X, Y, alpha)
    np.testing.assert_allclose(losses.kendall_surrogate(X, Y, alpha), expected, atol=TOL)
    np.testing.assert_allclose(losses.kendall_loss(X, Y, alpha), -expected, atol=TOL)


def test_kendall_surrogate_approaches_kendall_tau_for_large_alpha():
    from scipy.stats import kendalltau

    tau = kendalltau(X, Y).statistic
    np.testing.assert_allclose(losses.kendall_surrogate(X, Y, 1e4), tau, atol=1e-3)


@pytest.mark.parametrize("reduction", ["mean", "max"])
def test_margin_loss_matches_numpy(reduction):
    sim = np.array([[1.0, 0.9, 0.3], [0.85, 1.0, 0.95], [0.1, 0.7, 1.0]], np.float32)
    # Row 2 has no negatives, so the "max" reduction averages over rows 0 and 1 only.
    negative = np.array([[False, True, True], [True, False, True], [False, False, False]])
    expected = np_margin(sim, negative, 0.2, reduction)
    got = losses.margin_loss(sim, negative, margin=0.2, reduction=reduction)
    np.testing.assert_allclose(got, expected, atol=TOL)


def test_margin_loss_without_negatives_is_zero_and_rejects_unknown_reduction():
    none = np.zeros((2, 2), bool)
    assert float(losses.margin_loss(np.eye(2, dtype=np.float32), none)) == 0.0
    assert float(losses.margin_loss(np.eye(2, dtype=np.float32), none, reduction="max")) == 0.0
    with pytest.raises(ValueError, match="mean"):
        losses.margin_loss(SIM, ~POSITIVE, reduction="sum")


def test_triplet_loss_matches_numpy_with_and_without_mask():
    pos = np.array([0.9, 0.2, 0.5, 0.6], np.float32)
    neg = np.array([0.1, 0.3, 0.45, 0.9], np.float32)
    valid = np.array([True, True, False, True])
    hinge = [max(0.0, 0.2 - p + n) for p, n in zip(pos, neg, strict=True)]
    np.testing.assert_allclose(losses.triplet_loss(pos, neg, 0.2), sum(hinge) / 4, atol=TOL)
    masked = [h for h, v in zip(hinge, valid, strict=True) if v]
    got = losses.triplet_loss(pos, neg, 0.2, valid=valid)
    np.testing.assert_allclose(got, sum(masked) / len(masked), atol=TOL)
    assert float(losses.triplet_loss(pos, neg, 0.2, valid=np.zeros(4, bool))) == 0.0


def test_rank_loss_matches_numpy():
    np.testing.assert_allclose(
        losses.rank_loss(SIM, POSITIVE, 0.2), np_rank(SIM, POSITIVE, 0.2), atol=TOL
    )


def test_infonce_matches_numpy():
    np.testing.assert_allclose(
        losses.infonce_loss(SIM, POSITIVE, 0.1), np_infonce(SIM, POSITIVE, 0.1), atol=TOL
    )


def test_infonce_skips_rows_without_positives():
    positive = np.array([[True, False], [False, False]])
    expected = np_infonce(SIM[:2, :2], positive, 0.5)
    got = losses.infonce_loss(SIM[:2, :2], positive, 0.5)
    np.testing.assert_allclose(got, expected, atol=TOL)


def test_infonce_with_a_hard_negative_per_row_matches_numpy():
    """Row i's softmax gains its own negative (I2CE's word-swapped anchor) where valid; the
    column direction is unchanged."""
    hard = np.array([0.9, -0.2, 0.4, 0.1], np.float32)
    valid = np.array([True, False, True, True])
    t = 0.1
    logits = SIM.astype(np.float64) / t
    extra = np.where(valid, hard / t, -np.inf)[:, None]
    row_positive = np.concatenate([POSITIVE, np.zeros((4, 1), bool)], axis=1)
    rows = np_infonce_rows(np.concatenate([logits, extra], axis=1), row_positive)
    expected = 0.5 * (rows + np_infonce_rows(logits.T, POSITIVE.T))
    got = losses.infonce_loss(SIM, POSITIVE, t, (hard, valid))
    np.testing.assert_allclose(got, expected, atol=TOL)
    assert got > losses.infonce_loss(SIM, POSITIVE, t)  # a negative more costs more
    none_valid = losses.infonce_loss(SIM, POSITIVE, t, (hard, np.zeros(4, bool)))
    np.testing.assert_allclose(none_valid, losses.infonce_loss(SIM, POSITIVE, t), atol=TOL)
    grad = jax.grad(lambda h: losses.infonce_loss(SIM, POSITIVE, t, (h, valid)))(hard)
    assert np.all(np.isfinite(grad)) and grad[1] == 0 and np.all(grad[valid] > 0)


def test_pair_vectors_label_a_permuted_same_image_pair_positive():
    x, y = losses.pair_vectors(SIM, POSITIVE, PERM)
    expected_x, expected_y = np_pairs(SIM, POSITIVE, PERM)
    assert x.shape == y.shape == (8,)
    np.testing.assert_allclose(x, expected_x, atol=TOL)
    np.testing.assert_array_equal(y, expected_y)
    assert y[4] == 1.0  # perm[0] = 1 is caption 0's sibling
    assert list(y[5:]) == [-1.0, -1.0, -1.0]


def registry_reference(name, sim, positive, perm):
    x, y = np_pairs(sim, positive, perm)
    b = sim.shape[0]
    if name == "pearson":
        return -np_pearson(x, y)
    if name == "covariance":
        return -np_covariance(x, y)
    if name == "kendall":
        return -np_kendall_surrogate(x, y, 2.0)
    if name == "rank":
        return np_rank(sim, positive, 0.2)
    if name == "margin":
        negative = ~positive & ~np.eye(b, dtype=bool)
        return np_margin(sim, negative, 0.2, "mean")
    if name == "triplet":
        kept = [
            max(0.0, 0.2 - sim[i, i] + sim[i, perm[i]])
            for i in range(b)
            if not positive[i, perm[i]]
        ]
        return sum(kept) / len(kept)
    return np_infonce(sim, positive, 0.05)


REGISTRY_HPARAMS = {
    "pearson": {},
    "covariance": {},
    "kendall": {"alpha": 2.0},
    "rank": {"margin": 0.2},
    "margin": {"margin": 0.2, "reduction": "mean"},
    "triplet": {"margin": 0.2},
    "infonce": {"temperature": 0.05},
}


@pytest.mark.parametrize("name", sorted(REGISTRY_HPARAMS))
def test_registry_entry_matches_reference_and_has_finite_gradient(name):
    fn = losses.get_loss(name)
    hparams = REGISTRY_HPARAMS[name]
    got = fn(jnp.asarray(SIM), jnp.asarray(POSITIVE), jnp.asarray(PERM), **hparams)
    assert got.shape == () and got.dtype == jnp.float32
    np.testing.assert_allclose(got, registry_reference(name, SIM, POSITIVE, PERM), atol=TOL)
    grad = jax.grad(lambda s: fn(s, jnp.asarray(POSITIVE), jnp.asarray(PERM), **hparams))(
        jnp.asarray(SIM)
    )
    assert np.all(np.isfinite(grad)) and np.any(grad != 0)
    assert set(losses.loss_hparam_names(name)) == set(hparams)


def test_registry_covers_every_loss_and_works_under_jit():
    assert set(losses.LOSSES) == set(REGISTRY_HPARAMS)
    step = jax.jit(lambda s, p, q: losses.get_loss("margin")(s, p, q, reduction="max"))
    expected = np_margin(SIM, ~POSITIVE & ~np.eye(4, dtype=bool), 0.2, "max")
    np.testing.assert_allclose(step(SIM, POSITIVE, PERM), expected, atol=TOL)


def test_unknown_loss_name_lists_valid_names():
    with pytest.raises(KeyError, match="pearson"):
        losses.get_loss("hinge")
    with pytest.raises(TypeError):
        losses.get_loss("pearson")(SIM, POSITIVE, PERM, margin=0.2)
