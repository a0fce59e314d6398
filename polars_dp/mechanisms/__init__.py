"""Mechanisms: the only code that adds noise.  Each takes private input and returns a release."""

from polars_dp.mechanisms.basic import basic
from polars_dp.mechanisms.privelet import privelet

__all__ = ["basic", "privelet"]
