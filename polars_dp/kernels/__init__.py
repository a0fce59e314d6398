"""Pure numpy kernels with no privacy logic: wavelets, prefix sums, grids, Morton codes, PSTs."""
