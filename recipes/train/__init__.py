"""Training: instance modes and phase kinds. Importing this package registers all of them."""

from recipes.train import command

__all__ = ["command"]
