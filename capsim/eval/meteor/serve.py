"""``python -m capsim.eval.meteor.serve``: one METEOR worker process, started by
capsim.eval.meteor.workers; it reads shares of captions on stdin and writes their
statistics on stdout until stdin closes."""

import os
import sys

from capsim.eval.meteor.scorer import Meteor
from capsim.eval.meteor.workers import serve

if __name__ == "__main__":
    # Replies go to the original stdout; anything printed goes to stderr instead.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, replies, Meteor(processes=1).statistics_of)
