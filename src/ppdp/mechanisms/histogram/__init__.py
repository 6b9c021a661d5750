"""Differentially private multidimensional histograms (Xiao et al., DPCube) and baselines."""

from .baselines import ConsistentHierarchy, HierarchicalKDTree
from .dpcube import DEFAULT_ALPHA1_FRACTION, DEFAULT_XI0, DEFAULT_COUNT_THRESHOLD, CellHistogram, DPCube

__all__ = ["DPCube", "CellHistogram", "HierarchicalKDTree", "ConsistentHierarchy",
           "DEFAULT_ALPHA1_FRACTION", "DEFAULT_XI0", "DEFAULT_COUNT_THRESHOLD"]
