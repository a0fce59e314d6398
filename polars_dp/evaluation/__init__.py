"""Workload generators and exact, NOT-PRIVATE reference answers, for experiments only.

The references read the private data without noise: never publish their output.
"""
