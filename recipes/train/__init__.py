"""Training: instance modes and phase kinds. Importing this package registers all of them."""

from recipes.train import command  # noqa: F401

__all__ = ["command"]
