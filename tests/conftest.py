import os

from hypothesis import settings

# CI runs a fixed sequence of examples (derandomize) so a landing never depends on luck;
# locally every run explores new random tables.
settings.register_profile("ci", max_examples=100, deadline=None, derandomize=True, print_blob=True)
settings.register_profile("dev", max_examples=100, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
