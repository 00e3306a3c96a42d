"""pincer: a runtime that gives AI agents tools safely."""

__version__ = "0.1.0"
