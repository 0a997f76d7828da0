"""pgo-recipes: profile-guided optimised builds of Rust crates, checked at every step."""

from recipes.errors import PgoError

__all__ = ["PgoError"]
