"""METEOR 1.5 without Java, in place of pycocoevalcap's meteor-1.5.jar and Java.

``Meteor().compute_score(gts, res)`` follows pycocoevalcap. The data files
come from the installed pycocoevalcap (``pip install pycocoevalcap==1.2``).
Every Flickr8k-Expert candidate and one caption of every COCO val2017 image
scores as the jar scores it, to 1e-6, and so does the corpus score
(bench/agreement/meteor_agreement.py; tests/test_meteor.py checks a sample in the fast
tier and the full sets in the slow one).
"""

from capsim.metrics.meteor.resources import MeteorResourceError
from capsim.metrics.meteor.scorer import Meteor, corpus_stats, meteor_from_stats, summable

__all__ = ["Meteor", "MeteorResourceError", "corpus_stats", "meteor_from_stats", "summable"]
