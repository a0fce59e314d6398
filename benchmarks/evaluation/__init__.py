"""The utility evaluation (``python benchmarks/evaluate.py``): the experiments of the Privelet
and PrivTree papers rerun through polars-dp's public API, written as Markdown tables and
PNG plots into ``docs/results``.

Modules: :mod:`.metrics` (error measures, pure numpy), :mod:`.data` (datasets with their
public domain declarations), one module per experiment, and :mod:`.report` (tables, plots).
"""
