"""bench/quality/metaeval_report.py: the generated long-caption pair set (swap_pairs.py), its
table, and the report's n-gram metrics timed beside the drop-in."""

from __future__ import annotations

import json

from bench.quality import metaeval_report, swap_pairs
from capsim import metaeval
from capsim.data.judgment_files import read_caption_pairs


def test_long_pairs_are_paragraphs_of_two_categories_and_the_table_reads_them(
    shared_data, tmp_path
):
    path = tmp_path / "long.jsonl"
    lengths = swap_pairs.write_long_pairs(path, 20)
    pairs = read_caption_pairs(path)
    assert len(pairs) == 20 and {p.category for p in pairs} == set(swap_pairs.CATEGORIES)
    assert lengths["min"] >= 150 and lengths["max"] <= 300
    assert all(len(p.references) == swap_pairs.REFERENCES for p in pairs)
    assert all(p.candidate_a != p.candidate_b for p in pairs)
    out = tmp_path / "report.json"
    args = ["--judgments", f"pairs:{path}", "--no_meteor", "--bootstrap", "20", "--out", str(out)]
    assert metaeval.main([*args, "--permutations", "20"]) == 0
    rows = metaeval_report.metric_table(json.loads(out.read_text()), "pairs", "accuracy")
    clusters = [row["cluster"] for row in rows]
    assert clusters == sorted(clusters) and clusters[0] == 1
    assert set(rows[0]) == {"metric", "cluster", "accuracy", *swap_pairs.CATEGORIES}
    speed = metaeval_report.paragraph_speed(path, rounds=1)
    assert speed["ratio_median"] > 0 and len(speed["seconds"]["COCOEvalCap"]) == 1
