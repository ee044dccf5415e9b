"""METEOR 1.5 in pure Python, in place of pycocoevalcap's meteor-1.5.jar and Java.

``Meteor().compute_score(gts, res)`` follows pycocoevalcap. The data files
come from the installed pycocoevalcap (``pip install pycocoevalcap==1.2``).
On Flickr8k-Expert 98.5% and on COCO captions 97.7% of per-caption scores
equal the jar's to 1e-6 and the corpus score is within 1.4e-4; the rest
differ where the jar's alignment search keeps a different one of several
candidate matches (bench/meteor_agreement.py lists them; bench/RESULTS.md
classifies them).
"""

from capsim.eval.meteor.resources import MeteorResourceError
from capsim.eval.meteor.scorer import Meteor, corpus_stats, meteor_from_stats

__all__ = ["Meteor", "MeteorResourceError", "corpus_stats", "meteor_from_stats"]
