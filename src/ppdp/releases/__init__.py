"""Release families and the ppdp-release/1 directory format."""

from .base import FORMAT, Release, VerifyReport, load_release, register_family

__all__ = ["FORMAT", "Release", "VerifyReport", "load_release", "register_family"]
