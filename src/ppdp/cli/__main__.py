"""``python -m ppdp.cli …``: the ``ppdp`` command."""

from . import main

main()
