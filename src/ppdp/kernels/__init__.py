"""Numeric kernels shared by claims, releases, estimators, mechanisms and engines.

Plain NumPy/SciPy functions and small typed models; nothing here imports a release, an
estimator or a mechanism, so every layer above may use them.
"""
