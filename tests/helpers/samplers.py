"""Stand-ins for the exact sampler that tests put in place of ``discrete_laplace``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def with_out(draw: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """``discrete_laplace``'s signature, ``out=`` included, around ``draw(src, t, s, size)``:
    the draws it returns, written into ``out`` when one is given (as the real sampler does)."""

    def sampler(src, t, s, size, out=None):
        z = np.asarray(draw(src, t, s, size), dtype=np.int64)
        if out is None:
            return z
        out.reshape(-1)[:] = z.reshape(-1)
        return out

    return sampler
