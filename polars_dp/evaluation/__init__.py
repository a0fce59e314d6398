"""Workload generators and exact, NOT-PRIVATE reference answers, for experiments only.

The references read the private data without noise: never publish their output.  This package
is the public surface of the evaluation layer (the examples and benchmarks import from here):

* workloads: :func:`random_workload` and :func:`coverage` (grid range queries),
  :func:`random_boxes`, :data:`SIZE_CLASSES` and :func:`relative_errors` (spatial boxes);
* exact answers (NOT private): :func:`frequency_matrix` (the true counts of a declared domain),
  :func:`exact_range_count` / :func:`true_answers` / :func:`selectivity` on it,
  :func:`exact_range_counts` (true counts of boxes of points), :func:`exact_top_k_strings` and
  :func:`top_k_precision` (sequences).

>>> import polars as pl, polars_dp as pdp
>>> from polars_dp.evaluation import exact_range_count, frequency_matrix
>>> attrs = [pdp.Ordinal("age", 0, 9)]
>>> exact_range_count(frequency_matrix(pl.DataFrame({"age": [1, 2, 8]}), attrs), attrs, age=(0, 4))
2.0
"""

from polars_dp.counting.frequency import frequency_matrix
from polars_dp.evaluation.references import exact_range_count, exact_range_counts, selectivity, true_answers
from polars_dp.evaluation.sequences import exact_top_k_strings, top_k_precision
from polars_dp.evaluation.spatial_workloads import SIZE_CLASSES, random_boxes, relative_errors
from polars_dp.evaluation.workloads import coverage, random_workload

__all__ = ["SIZE_CLASSES", "coverage", "exact_range_count", "exact_range_counts", "exact_top_k_strings",
           "frequency_matrix", "random_boxes", "random_workload", "relative_errors", "selectivity",
           "top_k_precision", "true_answers"]
