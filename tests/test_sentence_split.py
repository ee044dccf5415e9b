"""The sentence splitter (issue 60): the PTB tokenizer's rules decide where a sentence ends."""

from __future__ import annotations

import pytest

from capsim.metrics.sentences import split_sentences


@pytest.mark.parametrize(
    "caption, sentences",
    [
        # abbreviations keep their period (the tokenizer's ABBREVIATIONS)
        (
            "Mr. Smith walks across St. Mark's square. A dog follows him.",
            ["Mr. Smith walks across St. Mark's square.", "A dog follows him."],
        ),
        ("Dr. Who is e.g. here. Ok", ["Dr. Who is e.g. here.", "Ok"]),
        # decimals are one number
        (
            "A 3.5 m boat on a lake. It is 2.75 m wide.",
            ["A 3.5 m boat on a lake.", "It is 2.75 m wide."],
        ),
        ("It costs $3. And more!", ["It costs $3.", "And more!"]),
        # ellipses end a sentence only before a capital letter
        ("a dog... running on the beach", ["a dog... running on the beach"]),
        ("A dog waits... The owner comes back.", ["A dog waits...", "The owner comes back."]),
        ("A cat sleeps\u2026 The sun sets.", ["A cat sleeps\u2026", "The sun sets."]),
        # a missing final stop still closes the last sentence
        (
            "A man rides a horse. Two dogs run beside him",
            ["A man rides a horse.", "Two dogs run beside him"],
        ),
        # lower-case text, as captioning models write it
        (
            "a man rides a horse. the horse is brown.",
            ["a man rides a horse.", "the horse is brown."],
        ),
        # closing quotes and brackets stay with their sentence
        ('He said "hi." Then he left.', ['He said "hi."', "Then he left."]),
        ("A man (in red.) Next to him a dog.", ["A man (in red.)", "Next to him a dog."]),
        # an initial before a sentence starter ends it; before a name it does not
        ("Photo by A. The dog runs.", ["Photo by A.", "The dog runs."]),
        ("by J. Smith. The end", ["by J. Smith.", "The end"]),
        # a kept abbreviation before a capitalised sentence starter ends a sentence
        (
            "A clock shows 5 p.m. The street is empty.",
            ["A clock shows 5 p.m.", "The street is empty."],
        ),
        # "!" and "?" inside a quoted phrase (Flickr8k's tokenised captions)
        (
            'A boy making an " oh ! " face in front of a bay .',
            ['A boy making an " oh ! " face in front of a bay .'],
        ),
        ("Whoa ! The cowboy is under the horse .", ["Whoa !", "The cowboy is under the horse ."]),
        # marks without a word join a neighbour
        ("... A dog", ["... A dog"]),
        ("A dog. ... The cat", ["A dog. ...", "The cat"]),
        ("", []),
        ("   \n ", []),
    ],
)
def test_edge_cases(caption, sentences):
    assert split_sentences(caption) == sentences


def test_one_long_sentence_comes_back_whole():
    words = " ".join(f"word{k}" for k in range(300))
    caption = f"  A very long caption with {words}, commas, 3.5 numbers and Mr. Smith in it.  "
    assert split_sentences(caption) == [caption.strip()]


def test_sentences_join_back_to_the_caption():
    caption = "A man rides a horse.  Two dogs run!\nThe sky is blue? yes"
    assert " ".join(split_sentences(caption)).split() == caption.split()


@pytest.mark.parametrize("space", ["\n", "\t", "\u00a0", "\u2009", "  ", " \n "])
def test_any_whitespace_between_words_splits_as_a_space(space):
    """The splitter finds a sentence's last word by the space before it; a line break or
    another kind of space there must find the same word."""
    caption = "Mr. Smith sat at 3.5 p.m. The dog ran. A cat sat... it was e.g. fine. Two dogs"
    spaced = caption.replace(" ", space)
    assert [s.split() for s in split_sentences(spaced)] == [
        s.split() for s in split_sentences(caption)
    ]
    assert len(split_sentences(caption)) == 4
