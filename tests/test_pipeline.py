"""The batch-gathering input pipeline: fixed random numbers, whole epochs, any process count."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from capsim import text
from capsim.data import corpus as corpus_lib
from capsim.data import pipeline
from capsim.data.records import CaptionRecord


def _batches(dataset, count):
    iterator = iter(dataset)
    return [next(iterator) for _ in range(count)]


def _rows_and_draws(rows, draws):
    return {"rows": rows.copy(), "draws": draws}


def test_uniform_draws_are_fixed_by_seed_and_position_and_uniform():
    positions = np.arange(100_000)
    draws = pipeline.uniform_draws(3, positions)
    assert draws.min() >= 0.0 and draws.max() < 1.0
    np.testing.assert_array_equal(draws[1234:1240], pipeline.uniform_draws(3, positions[1234:1240]))
    assert stats.kstest(draws, "uniform").pvalue > 1e-3
    assert not np.array_equal(draws[:100], pipeline.uniform_draws(4, positions[:100]))


def test_each_epoch_visits_every_example_once_in_a_new_order():
    dataset = pipeline.training_dataset(48, _rows_and_draws, global_batch_size=8, seed=0)
    batches = _batches(dataset, 12)  # two epochs of 6 batches
    first = np.concatenate([b["rows"] for b in batches[:6]])
    second = np.concatenate([b["rows"] for b in batches[6:]])
    assert sorted(first) == list(range(48)) and sorted(second) == list(range(48))
    assert not np.array_equal(first, second)


def test_processes_take_contiguous_blocks_of_the_same_global_batch(monkeypatch):
    whole = _batches(pipeline.training_dataset(40, _rows_and_draws, global_batch_size=8, seed=5), 7)
    monkeypatch.setattr(pipeline.jax, "process_count", lambda: 2)
    shares = []
    for index in range(2):
        monkeypatch.setattr(pipeline.jax, "process_index", lambda index=index: index)
        dataset = pipeline.training_dataset(40, _rows_and_draws, global_batch_size=8, seed=5)
        shares.append(_batches(dataset, 7))
    for full, zero, one in zip(whole, *shares, strict=True):
        for key in ("rows", "draws"):
            np.testing.assert_array_equal(np.concatenate([zero[key], one[key]]), full[key])


def _corpus(captions_per_image: list[int]) -> corpus_lib.EncodedCorpus:
    records = [
        CaptionRecord(f"img{image}", f"{image}-{n}", f"caption {n} of {image}", "train")
        for image, count in enumerate(captions_per_image)
        for n in range(count)
    ]
    records = [records[i] for i in np.random.default_rng(0).permutation(len(records))]
    vocab = text.Vocab.build(text.tokenize(r.text) for r in records)
    return corpus_lib.encode_corpus(records, vocab, max_len=8)


def test_other_captions_pick_every_other_caption_of_the_image_evenly():
    corpus = _corpus([1, 2, 5, 3])
    draws = np.random.default_rng(1).random(20_000)
    for row in range(len(corpus)):
        siblings = set(corpus.captions_of_image[corpus.image_index[row]].tolist()) - {row}
        chosen = corpus.other_captions(np.full(len(draws), row), draws)
        if not siblings:
            assert set(chosen.tolist()) == {row}
            continue
        assert set(chosen.tolist()) == siblings
        counts = np.bincount(chosen, minlength=len(corpus))[sorted(siblings)]
        if len(counts) > 1:
            assert stats.chisquare(counts).pvalue > 1e-3


@pytest.mark.parametrize("draw", [0.0, 0.999999])
def test_other_captions_at_the_ends_of_the_draw_range(draw):
    corpus = _corpus([4, 2])
    rows = np.arange(len(corpus))
    chosen = corpus.other_captions(rows, np.full(len(rows), draw))
    assert np.all(chosen != rows)
    assert np.array_equal(corpus.image_index[chosen], corpus.image_index[rows])


def _rows_draws_and_width(rows, draws, width=None):
    return {"rows": rows.copy(), "draws": draws, "width": width}


def _buckets(widths, multiple=4, max_width=20):
    return pipeline.LengthBuckets(np.asarray(widths), multiple, max_width)


def test_length_buckets_group_similar_widths_and_cut_each_batch_to_its_widest():
    widths = np.random.default_rng(0).integers(3, 21, 400)
    buckets = _buckets(widths)
    dataset = pipeline.training_dataset(
        400, _rows_draws_and_width, global_batch_size=16, seed=2, length_buckets=buckets
    )
    batches = _batches(dataset, 50)  # two epochs of 25 batches
    for epoch in (batches[:25], batches[25:]):
        rows = np.concatenate([b["rows"] for b in epoch])
        assert len(set(rows.tolist())) == 400  # every example at most once; 0 left over here
    rounded = [sorted(set(buckets.rounded(b["rows"]).tolist())) for b in batches]
    for batch, widths_in in zip(batches, rounded, strict=True):
        assert batch["width"] == max(widths_in) and batch["width"] >= widths[batch["rows"]].max()
    # 5 rounded widths (4..20) leave at most 4 batches per epoch that straddle two of them.
    assert sum(len(w) > 1 for w in rounded[:25]) <= 4
    # Batches of one width still come in a random order, and the two epochs differ.
    assert len({b["width"] for b in batches[:5]}) > 1
    assert not np.array_equal(batches[0]["rows"], batches[25]["rows"])


def test_length_buckets_cap_at_the_padded_width_and_leave_a_random_remainder():
    buckets = _buckets([19, 20, 7], multiple=8, max_width=20)
    assert buckets.rounded(np.arange(3)).tolist() == [20, 20, 8]
    dataset = pipeline.training_dataset(
        50, _rows_draws_and_width, global_batch_size=8, seed=0, length_buckets=_buckets(range(50))
    )
    left_out = [
        set(range(50)) - set(np.concatenate([b["rows"] for b in _batches(dataset, 12)[e::2]]))
        for e in (0, 1)
    ]
    assert all(len(rest) >= 2 for rest in left_out)


def test_length_bucketed_processes_cut_their_shares_to_the_global_batch_width(monkeypatch):
    widths = np.random.default_rng(1).integers(3, 21, 160)

    def dataset():
        return pipeline.training_dataset(
            160,
            _rows_draws_and_width,
            global_batch_size=8,
            seed=5,
            length_buckets=_buckets(widths),
        )

    whole = _batches(dataset(), 30)
    monkeypatch.setattr(pipeline.jax, "process_count", lambda: 2)
    shares = []
    for index in range(2):
        monkeypatch.setattr(pipeline.jax, "process_index", lambda index=index: index)
        shares.append(_batches(dataset(), 30))
    for full, zero, one in zip(whole, *shares, strict=True):
        np.testing.assert_array_equal(np.concatenate([zero["rows"], one["rows"]]), full["rows"])
        assert zero["width"] == one["width"] == full["width"]


def test_corpus_length_buckets_cover_the_other_captions_of_each_image():
    corpus = _corpus([1, 2, 5, 3])
    lengths = corpus.mask.sum(axis=1)
    assert corpus.length_buckets(0) is None
    own = corpus.length_buckets(2)
    np.testing.assert_array_equal(own.widths, lengths)
    assert own.max_width == corpus.ids.shape[1]
    with_others = corpus.length_buckets(2, with_other_captions=True)
    for row in range(len(corpus)):
        siblings = corpus.captions_of_image[corpus.image_index[row]]
        assert with_others.widths[row] == lengths[siblings].max()
    ids, mask = corpus.tokens(np.array([0, 3]), width=5)
    assert ids.shape == mask.shape == (2, 5)
    np.testing.assert_array_equal(ids, corpus.ids[[0, 3], :5])


@pytest.mark.parametrize("multiple", [-4, 2.5, "4"])
def test_a_bad_length_bucket_setting_is_a_clear_error(multiple):
    with pytest.raises(ValueError, match=r"config.data.length_buckets must be 0 \(off\)"):
        _corpus([2, 2]).length_buckets(multiple)


def _topic_corpus(num_captions=2000, seed=0) -> tuple[corpus_lib.EncodedCorpus, text.Vocab]:
    """Captions "a <animal> <verb> in the <place>": 40 animals, 30 verbs, 30 places, each
    word in 2.5-3.3% of the captions (content words), "a", "in", "the" in all of them."""
    rng = np.random.default_rng(seed)
    animal, verb, place = (rng.integers(0, n, num_captions) for n in (40, 30, 30))
    records = [
        CaptionRecord(f"img{i // 2}", str(i), f"a animal{a} verb{v} in the place{p}", "train")
        for i, (a, v, p) in enumerate(zip(animal, verb, place, strict=True))
    ]
    vocab = text.Vocab.build(text.tokenize(r.text) for r in records)
    return corpus_lib.encode_corpus(records, vocab, max_len=10), vocab


def _mates_sharing_a_word(corpus, batches):
    """Per caption, how many others of its batch share a word with it ("a", "in", "the" aside)."""
    counts = []
    for batch in batches:
        words = [set(corpus.records[r].text.split()) - {"a", "in", "the"} for r in batch["rows"]]
        counts += [sum(bool(w & other) for other in words) - 1 for w in words]
    return float(np.mean(counts))


def test_topic_clusters_are_runs_of_captions_sharing_a_content_word():
    corpus, vocab = _topic_corpus()
    clusters = corpus.topic_clusters(4)
    assert corpus.topic_clusters(0) is None
    content = set(clusters.words[clusters.words >= 0].tolist())
    assert not content & set(vocab.lookup(["a", "in", "the"]))
    assert len(content) == 40 + 30 + 30
    clustered = pipeline.training_dataset(
        len(corpus), _rows_and_draws, global_batch_size=16, seed=3, topic_clusters=clusters
    )
    plain = pipeline.training_dataset(len(corpus), _rows_and_draws, global_batch_size=16, seed=3)
    # At random a batch mate shares a word with chance 1/40 + 2/30, about 1.4 of 15 mates;
    # in runs of 4, the 3 run mates do too.
    for dataset, low, high in ((clustered, 3.5, 15.0), (plain, 0.0, 2.0)):
        batches = _batches(dataset, 250)  # two epochs of 125
        for epoch in (batches[:125], batches[125:]):
            rows = np.concatenate([b["rows"] for b in epoch])
            assert len(set(rows.tolist())) == len(rows) == 2000  # each example once
        assert low <= _mates_sharing_a_word(corpus, batches) <= high
    # A new order each epoch, the same order for the same seed (so a resumed run matches).
    again = _batches(
        pipeline.training_dataset(
            len(corpus), _rows_and_draws, global_batch_size=16, seed=3, topic_clusters=clusters
        ),
        130,
    )
    first = _batches(clustered, 130)
    np.testing.assert_array_equal(first[129]["rows"], again[129]["rows"])
    assert not np.array_equal(first[0]["rows"], first[125]["rows"])


def test_topic_clusters_keep_to_one_width_under_length_buckets():
    corpus, _ = _topic_corpus(num_captions=6000)  # a fifth of each word's captions per width
    widths = np.random.default_rng(4).integers(3, 21, len(corpus))
    dataset = pipeline.training_dataset(
        len(corpus),
        _rows_draws_and_width,
        global_batch_size=16,
        seed=1,
        length_buckets=_buckets(widths),
        topic_clusters=corpus.topic_clusters(4),
    )
    batches = _batches(dataset, 375)  # one epoch
    rounded = [sorted(set(_buckets(widths).rounded(b["rows"]).tolist())) for b in batches]
    assert sum(len(w) > 1 for w in rounded) <= 4  # 5 widths: at most 4 batches straddle two
    assert _mates_sharing_a_word(corpus, batches) >= 3.0


def test_i2ce_training_batches_take_topic_clusters_from_the_data_config():
    import ml_collections

    from i2ce_jax import data as i2ce_data

    corpus, vocab = _topic_corpus()
    config = ml_collections.ConfigDict(
        dict(batch_size=16, seed=0, data=dict(length_buckets=0, topic_clusters=4))
    )
    row_of = {r.text: i for i, r in enumerate(corpus.records)}

    def anchors(dataset):
        batches = _batches(dataset, 125)
        texts = [
            [
                " ".join(vocab.decode(ids[mask][1:-1]))
                for ids, mask in zip(b["anchor_ids"], b["anchor_mask"], strict=True)
            ]
            for b in batches
        ]
        return [{"rows": [row_of[t] for t in batch]} for batch in texts]

    clustered = anchors(i2ce_data.training_batches(config, corpus).dataset(config))
    config.data.topic_clusters = 0
    plain = anchors(i2ce_data.training_batches(config, corpus).dataset(config))
    assert (
        _mates_sharing_a_word(corpus, clustered)
        >= 3.5
        > 2.0
        >= _mates_sharing_a_word(corpus, plain)
    )


@pytest.mark.parametrize("size", [-1, 2.5, "8"])
def test_a_bad_topic_cluster_setting_is_a_clear_error(size):
    with pytest.raises(ValueError, match=r"config.data.topic_clusters must be 0 \(off\)"):
        _corpus([2, 2]).topic_clusters(size)
