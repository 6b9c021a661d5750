"""Privacy mechanisms, one sub-package per release family."""
