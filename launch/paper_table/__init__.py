"""A paper's table as a seeded grid: the one room of the concept.

- ``layout``: the table (:class:`Table`: rows, measures, the paper's figures) and the
  claims it makes (:class:`Claim`); ``ROW_PARAM``, the grid's row column.
- ``grid_config``: ``table_grid``, what a table config (``configs/tables/*.py``) builds
  its ``get_config``, ``get_sweep`` and ``parse_table_arg`` with.
- ``values``: the table's values, read from its grid's job folders.
- ``verdicts``: each claim's verdict, a paired t-test over seeds.
- ``output``: ``table.md`` and ``table.json`` (``write_table``). A grid's end
  (launch.finish) writes them for a table config; ``python -m launch.report`` writes them
  for a grid already run.

The package is called ``paper_table``, never just "tables": capsim.tables formats
markdown, configs/tables/ holds the table configs, bench/throughput_tables/ times steps.
This module exports what a table config needs, so loading one stays light (no SciPy).
"""

from launch.paper_table.grid_config import table_grid
from launch.paper_table.layout import ROW_PARAM, Claim, Table

__all__ = ["ROW_PARAM", "Claim", "Table", "table_grid"]
