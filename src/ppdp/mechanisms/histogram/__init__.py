"""Differentially private multidimensional histograms (Xiao et al., DPCube) and baselines."""

from .baselines import ConsistentHierarchy, HierarchicalKDTree
from .dpcube import (DEFAULT_ALPHA1_FRACTION, DEFAULT_COUNT_THRESHOLD, DEFAULT_XI0, CellHistogram, DPCube,
                     DPCubePaper, HistogramMechanism)
from .strategies import AdaptiveGrid, DefaultHistogram, KroneckerLeastSquares, MarginalsModel

__all__ = ["DPCube", "DPCubePaper", "CellHistogram", "HierarchicalKDTree", "ConsistentHierarchy", "HistogramMechanism", "KroneckerLeastSquares",
           "AdaptiveGrid", "MarginalsModel", "DefaultHistogram",
           "DEFAULT_ALPHA1_FRACTION", "DEFAULT_XI0", "DEFAULT_COUNT_THRESHOLD"]
