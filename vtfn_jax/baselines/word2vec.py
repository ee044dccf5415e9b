"""word2vec baseline: gensim Word2Vec trained on captions; a sentence is the mean of its words.

It learns from every caption of the training images, even when VTFN keeps one
caption per image (``data.captions_per_image="one"``): that rule stops an image
acting as a pivot between captions, which word2vec never sees. Dev and test
images stay out. Optional extra caption files (``config.model.extra_captions``,
e.g. Flickr8k train) add text; captions of dev/test images among them are dropped.
Training is single-threaded with a fixed seed, so a config repeats exactly.
"""

from __future__ import annotations

import logging
from pathlib import Path

import ml_collections

from capsim import text
from capsim.data import corpus as corpus_lib
from capsim.data.records import CaptionRecord
from capsim.errors import CheckpointError
from capsim.task import Task
from capsim.workdir import is_main_process, save_config
from vtfn_jax.baselines.glove_average import WordAverageEmbedder
from vtfn_jax.data import VtfnData

logger = logging.getLogger(__name__)

VECTORS_FILE = "word2vec.kv"
ALGORITHMS = {"skipgram": 1, "cbow": 0}  # gensim's ``sg`` flag
WINDOW = 5
GENSIM_INSTALL_HINT = "pip install -e '.[baselines]'"


def _gensim_models():
    try:
        from gensim import models
    except ImportError as error:
        raise ImportError(
            f"the word2vec baseline needs gensim (the [baselines] extra): {GENSIM_INSTALL_HINT}"
        ) from error
    return models


def training_images_captions(
    config: ml_collections.ConfigDict, data: VtfnData
) -> list[CaptionRecord]:
    """All captions of the training images, read again when the harness kept one per image."""
    if config.data.captions_per_image == "all":
        return list(data.records["train"])
    source = (
        data.world.captions if data.world is not None else corpus_lib.read_sources(config.data)[0]
    )
    train_images = set(data.splits["train"].corpus.image_ids)
    return [record for record in source if record.image_id in train_images]


def extra_caption_records(config: ml_collections.ConfigDict, data: VtfnData) -> list[CaptionRecord]:
    """Captions of the ``config.model.extra_sources`` caption sources, minus dev/test images."""
    if not config.model.extra_sources:
        return []
    held_out = {i for name in ("dev", "test") for i in data.splits[name].corpus.image_ids}
    records = corpus_lib.read_sources(config.data, config.model.extra_sources)[0]
    kept = [record for record in records if record.image_id not in held_out]
    if len(kept) < len(records):
        logger.info(
            "word2vec: dropped %d extra captions of dev/test images", len(records) - len(kept)
        )
    return corpus_lib.without_karpathy_test(kept, config.data)


def task(config: ml_collections.ConfigDict, data: VtfnData) -> Task:
    """The fit trains word vectors on the captions and saves them to ``workdir/word2vec.kv``."""
    model_config = config.model
    if model_config.w2v_algorithm not in ALGORITHMS:
        raise ValueError(
            f"model.w2v_algorithm must be one of {sorted(ALGORITHMS)}, got {model_config.w2v_algorithm!r}"
        )

    def fit(workdir: Path) -> tuple[WordAverageEmbedder, dict]:
        own = training_images_captions(config, data)
        extra = extra_caption_records(config, data)
        sentences = [text.tokenize(record.text) for record in own + extra]
        model = _gensim_models().Word2Vec(
            sentences,
            vector_size=model_config.dim,
            window=WINDOW,
            min_count=model_config.w2v_min_count,
            sg=ALGORITHMS[model_config.w2v_algorithm],
            epochs=model_config.w2v_epochs,
            seed=config.seed,
            workers=1,
        )
        if is_main_process():
            Path(workdir).mkdir(parents=True, exist_ok=True)
            save_config(config, workdir)
            model.wv.save(str(Path(workdir) / VECTORS_FILE))
        embedder = WordAverageEmbedder(model.wv.index_to_key, model.wv.vectors)
        summary = {
            "train_captions": len(own),
            "extra_captions": len(extra),
            "words_with_vectors": len(model.wv),
            "vocab_covered": embedder.covered(data.vocab),
        }
        logger.info("word2vec: %s", summary)
        return embedder, summary

    return Task(subject_of=data.subject, fit=fit)


def load(config: ml_collections.ConfigDict, workdir: Path, data: VtfnData) -> WordAverageEmbedder:
    path = Path(workdir) / VECTORS_FILE
    if not path.is_file():
        raise CheckpointError(f"word2vec vectors {path} do not exist; train this workdir first")
    vectors = _gensim_models().KeyedVectors.load(str(path))
    return WordAverageEmbedder(vectors.index_to_key, vectors.vectors)
