"""bench/quality/i2ce_ensembles.py: the ensemble cosine and its Expert τc against NumPy/SciPy
loops."""

from __future__ import annotations

import numpy as np
from scipy import stats

from bench.quality.i2ce_ensembles import Measures, ensemble_vectors
from capsim.eval.judgment_harness import JudgedPairs


def _unit(rng, n, d):
    v = rng.normal(size=(n, d))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_ensemble_cosine_is_the_mean_of_the_members_cosines():
    rng = np.random.default_rng(0)
    members = [_unit(rng, 6, 4), _unit(rng, 6, 8), _unit(rng, 6, 3)]
    joined = ensemble_vectors(members)
    np.testing.assert_allclose(np.linalg.norm(joined, axis=1), 1.0)
    mean_cosine = np.mean([m @ m.T for m in members], axis=0)
    np.testing.assert_allclose(joined @ joined.T, mean_cosine, atol=1e-12)
    np.testing.assert_allclose(ensemble_vectors(members[:1]), members[0])


def test_expert_tau_c_pools_the_top_3_references_as_a_loop_does():
    rng = np.random.default_rng(1)
    sentences = [f"s{i}" for i in range(9)]
    gts = {"0": ["s1", "s2", "s3", "s4"], "1": ["s5", "s6"], "2": ["s1", "s7", "s8"]}
    res = {"0": ["s0"], "1": ["s8"], "2": ["s2"]}
    pairs = JudgedPairs(
        keys=list(gts),
        gts=gts,
        res=res,
        human=np.array([1.0, 3.0, 2.0, 4.0, 2.0]),
        pair_of_rating=np.array([0, 0, 1, 2, 1]),
        ids=list(gts),
        image_of_pair=np.arange(3),
        systems=[""] * 3,
    )
    measures = object.__new__(Measures)
    measures.expert, measures.expert_sentences = pairs, sentences
    vectors = _unit(rng, len(sentences), 5)
    vector = dict(zip(sentences, vectors, strict=True))
    per_pair = []
    for key in pairs.keys:
        cosines = sorted((vector[res[key][0]] @ vector[r] for r in gts[key]), reverse=True)
        per_pair.append(np.mean(cosines[:3]))
    expected = stats.kendalltau(
        np.array(per_pair)[pairs.pair_of_rating], pairs.human, variant="c"
    ).statistic
    np.testing.assert_allclose(measures.expert_tau_c(vectors), 100 * expected, atol=1e-9)
