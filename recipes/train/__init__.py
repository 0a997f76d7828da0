"""Training's plugins: instance modes (command, server), phase kinds (command, http, handshakes) and setup
resources. Importing this package registers all of them in :mod:`recipes.workload.registry`.

The layering: :mod:`recipes.workload` (the file, its format, the registry) is below and knows none of them; they
import it to register; :mod:`recipes.train.trainer` (the runner of a workload) is above them and drives them.
"""

from recipes.train import command, handshakes, http, resources, server

__all__ = ["command", "handshakes", "http", "resources", "server"]
