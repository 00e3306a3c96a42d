"""Encrypted secret store (``store``), its key (``keys``), per-call access (``access``)."""
