"""Privacy audit (SPEC §4): the adversary's best posterior per record class vs the model's
bound, the differential inference demonstration and the corruption attack.

- :func:`audit_release` (``posterior.py``): every family; :class:`AuditResult`.
- :func:`differential_inference` (``differential.py``): Monte-Carlo of Theorem 2 of
  Wang et al. (2011).
- :func:`corruption_posterior`, :func:`corruption_table` (``corruption.py``): the corruption
  attack with and without fake values.
- :func:`write_audit`, :func:`write_differential` (``files.py``): CSV + PNG + HTML report.
- :func:`attack_release`, :func:`attack_mechanism` (``attacks.py``): singling out, linkability,
  attribute inference and histogram reconstruction on training vs held-back control records
  (Giomi et al. 2023), next to each claim's bound.
- ``swap_audit.py`` (imported on its own: it publishes through :func:`ppdp.publish`): A''s swap
  neighbours told apart through publish, against the certificate's ``swap_advantage``.
"""

from .attacks import AttackReport, attack_mechanism, attack_release
from .corruption import corruption_posterior, corruption_table
from .differential import differential_inference, theorem2
from .files import write_audit, write_differential
from .posterior import AuditResult, audit_release, bayes_posterior, decoy_cooccurrence

__all__ = ["AttackReport", "attack_mechanism", "attack_release", "AuditResult", "audit_release", "bayes_posterior", "decoy_cooccurrence", "differential_inference", "theorem2",
           "corruption_posterior", "corruption_table", "write_audit", "write_differential"]
