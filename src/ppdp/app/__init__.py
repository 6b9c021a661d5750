"""``ppdp app``: a local web application taking a custodian from a table to a verified release.

Load a table and review its inferred schema, compare models, publish and verify, query a
release — each step one of the library's verbs (docs/app.md). Import :func:`serve` or
:func:`create_app` from :mod:`ppdp.app.server`; this package imports nothing heavy itself."""
