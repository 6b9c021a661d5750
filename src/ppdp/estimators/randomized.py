"""Estimators of the randomized family (uniform perturbation, SDR, global randomization A, A').

Every estimator reads the release's public transition model
(:meth:`~ppdp.releases.randomized.RandomizedRelease.transition_models`) and answers with one
signature, ``release.answer(workload, estimator=…)``.

**Inversion** (``"inversion"``; uniform, SDR, global): in group (sub-table) j, for the n rows
meeting a QI predicate of which y show x, x̂ = (y − n·q_j)/p_j (SPEC §2.3), summed over the
groups and the selected values — unbiased.

**EM** (``"em"``) and **Norm-Sub** (``"norm-sub"``) (uniform, SDR, global): per distinct QI
predicate and sub-table, the whole vector of SA counts of the rows meeting the predicate is
estimated non-negative with the known total n_P,j — by the iterative Bayesian update
(Agrawal & Aggarwal 2001) or by projecting the inversion onto {x ≥ 0, Σx = n_P,j} (Wang et
al. 2020) — and each query adds up the values it selects. Consistent, biased near zero.
``EM.answer_with_iterations`` reports the iteration counts. docs/sdr.md gives the numbers.

**Empirical Bayes** (``"eb"``, the default of uniform perturbation, SDR and A): per distinct QI
predicate and sub-table, the inversion shrunk towards a parent SA distribution by the best
linear predictor under a Dirichlet-multinomial model, its strength estimated from the
predicate's own counts, then projected like Norm-Sub (:func:`eb_shrink`, :func:`eb_fit`), then guarded
count by count towards Norm-Sub's and EM's counts (:func:`~ppdp.estimators.uniform.guarded`).

**A'** (Fu, Wang, Wang & Wong 2014, §5, §7.2; SPEC §2.4):

- SA-only counts: f'_s, the count of s in D' (the MLE, Theorem 3);
- the 4-state model of Definitions 6–7 / Figure 3 with the exact transition
  r = P(s̄ → s) = f_s(ℓ'−1)/(ℓ'(N−f_s)): a tuple whose value is not s lies in one of the f_s
  groups that contain s with probability f_s(ℓ'−1)/(N−f_s) and then publishes s with
  probability 1/ℓ'. The paper writes a_01 = a_23 = (x1+x3)/N = f_s/N, which counts the
  s-tuples themselves as possible decoy holders and over-states r by ℓ'/(ℓ'−1)·(N−f_s)/N
  (25 % for ℓ' = 5); ``r="paper"`` selects that approximation for comparison. With the exact
  r the model reproduces Theorem 3 (its fixed point keeps f̂_s = f'_s), the paper's does not.
  ``"iterative"``: the iterative Bayesian update of eq 12–13, x⁰ = y, stopped when no
  component moves by more than ``tol`` (relative, floor one row; the paper uses 1 %);
  ``"closed"``: x̂ = (y3 − n_P·r)/(1/ℓ' − r) (exact inversion, unbiased, can be negative).
- the full m × m transition (default): the 4-state model assumes a tuple of any other value
  is equally likely to share a group with s, but Anatomy's group creation puts large values
  with large values, so predicates correlated with the SA are biased. The receiver re-runs the
  deterministic group schedule on the published counts (the release's transition model) and
  solves E[y_P] = x_P T for the counts of every SA value among P's rows: ``"full-closed"``
  x̂_P = y_P T⁻¹ (unbiased with the true T, can be negative), ``"full-iterative"`` the
  iterative Bayesian update with the full T (non-negative). Several SAs: T1 ⊗ T2 ⊗ ….
  ``transition_counts`` replaces the published counts (analysis only: a receiver does not
  have the true counts).
- intervals (:meth:`DivertedEstimator.estimate`): the linear estimator's normal interval cut to
  [0, n_P] and widened to hold the estimate; the full-transition estimators' variance by
  default ``"rebuilt"`` (:mod:`ppdp.estimators.diverted_variance`: T̂ rebuilt from the same
  published counts, which carry part of y_P's noise); the 4-state estimators take ``full-closed``'s.

Value sets (IN) are answered by summing the per-value estimates. docs/diverted.md gives the
numbers behind the default. ``answer_with_iterations`` returns the A' estimators' iteration
counts next to the estimates.

This module gathers the family's public names; the code lives by family: :mod:`.channel`
(the uniform channel's transition model, MLE/EM kernels, Norm-Sub and the family's estimator
base), :mod:`.eb_rows` and :mod:`.empirical_bayes` (empirical Bayes), :mod:`.uniform` (the
estimators of uniform perturbation, SDR and A) and :mod:`.diverted` (the A' estimators).
"""

from __future__ import annotations

from .channel import (DEFAULT_TOL, EM_TOL, MAX_ITER, RandomizedEstimator, UniformSetup, distinct_predicates, norm_sub,
                      norm_sub_full, parent_distribution, uniform_em, uniform_mle)
from .diverted import (A_VARIANCES, BOOT_REPLICATES, METHODS, CountVectors, DivertedEstimator, FourStateClosed,
                       FourStateIterative, FullClosed, FullIterative, TransitionNoise, closed_form, diverted_estimates,
                       full_closed, full_iterative, iterative_bayes)
from .eb_rows import EB_BLOCK_ENTRIES, EB_GRID, EBCounts, EBEntries, EBRows
from .empirical_bayes import (EB_AUTO_STRENGTH, EB_COVARIANCES, EB_PARENTS, EB_SHRINK_ROWS, EB_STRENGTHS, eb_fit,
                              eb_loglik, eb_priors, eb_shrink)
from .uniform import EM, MLE, EmpiricalBayes, Inversion, NormSub, consistent_estimates, inversion_estimates

__all__ = ["A_VARIANCES", "BOOT_REPLICATES", "DEFAULT_TOL", "EB_AUTO_STRENGTH", "EB_BLOCK_ENTRIES", "EB_COVARIANCES",
           "EB_GRID", "EB_PARENTS", "EB_SHRINK_ROWS", "EB_STRENGTHS", "EM", "EM_TOL", "MAX_ITER", "METHODS", "MLE",
           "CountVectors", "DivertedEstimator", "EBCounts", "EBEntries", "EBRows", "EmpiricalBayes", "FourStateClosed",
           "FourStateIterative", "FullClosed", "FullIterative", "Inversion", "NormSub", "RandomizedEstimator",
           "TransitionNoise", "UniformSetup", "closed_form", "consistent_estimates", "distinct_predicates",
           "diverted_estimates", "eb_fit", "eb_loglik", "eb_priors", "eb_shrink", "full_closed", "full_iterative",
           "inversion_estimates", "iterative_bayes", "norm_sub", "norm_sub_full", "parent_distribution", "uniform_em",
           "uniform_mle"]
