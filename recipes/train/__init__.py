"""Training: instance modes, phase kinds and setup resources. Importing this package registers all of them."""

from recipes.train import command, handshakes, http, resources, server

__all__ = ["command", "handshakes", "http", "resources", "server"]
