"""I2CE and any caption metric against human judgments: capsim.metaeval with I2CE beside
the built-in metrics.

    python -m i2ce_jax.evaluate --judgments NAME:PATH[,NAME:PATH...] [--judgments NAME:PATH ...]
        [--model base|large|research | --checkpoint W] [--sentences auto|whole|sentences]
        [capsim.metaeval's arguments]

Everything but the I2CE column is ``python -m capsim.metaeval``: its ``--help`` and its
docstring say what each set, statistic and test is. The I2CE model is the packaged
``--model`` (default ``base``) or a training workdir (``--checkpoint``); it is loaded
only when I2CE is among ``--metrics``; ``--scorer 1`` is the scorer before word-level
evidence (issue 69), and the JSON's ``model`` names both (``"I2CE base, scorer 2"``). ``--sentences`` and its companions choose how
captions of several sentences are scored, as in ``i2ce_jax.score`` (docs/long_captions.md). The report goes to ``--out`` (default
i2ce_evaluation.json) and its CSV beside it.
"""

from __future__ import annotations

from capsim import metaeval
from capsim.cli import run_command
from capsim.eval.plugged_metrics import ComputeScore
from i2ce_jax import pretrained
from i2ce_jax.score import add_sentence_arguments, sentence_options
from i2ce_jax.scorer import I2CEScorer


def main(argv: list[str] | None = None) -> int:
    parser = metaeval.parser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model",
        default=pretrained.DEFAULT,
        choices=pretrained.NAMES,
        help="packaged model (research: non-commercial terms, see its MODEL_CARD.md)",
    )
    parser.add_argument("--checkpoint", default=None, help="an I2CE training workdir instead")
    add_sentence_arguments(parser)
    parser.set_defaults(out="i2ce_evaluation.json")
    args = parser.parse_args(argv)
    options = sentence_options(args)

    def i2ce() -> ComputeScore:
        if args.checkpoint:
            return I2CEScorer.from_checkpoint(args.checkpoint, **options).compute_score
        return I2CEScorer.pretrained(args.model, **options).compute_score

    # What a paper cites: the model and the scorer's version (I2CEScorer.version).
    version = f"I2CE {args.checkpoint or args.model}, scorer {args.scorer}"
    return metaeval.run(args, {"I2CE": i2ce}, model=version, prog="i2ce_jax.evaluate")


def cli() -> None:
    run_command(main, "i2ce_jax.evaluate")


if __name__ == "__main__":
    cli()
