"""pgo-recipes: profile-guided optimised builds of Rust crates, checked at every step.

A crate's own project uses it with a noxfile of three lines (``recipes.sessions.register_pgo_sessions``)::

    import recipes.sessions

    recipes.sessions.register_pgo_sessions()
"""

from recipes.errors import PgoError

__all__ = ["PgoError"]
