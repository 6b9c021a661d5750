"""Numeric kernels below the claims and the releases: hardened noise and the privacy budget
(:mod:`.noise`), cube and box arithmetic on grids (:mod:`.grid`), the randomized family's
transition model (:mod:`.transition`). Plain NumPy/SciPy functions and small typed models that
import nothing of ppdp above :mod:`ppdp.table`, so writers (mechanisms), readers (releases,
estimators) and the claims that re-derive a guarantee share one implementation."""
