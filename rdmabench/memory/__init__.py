"""Message buffers in every memory mode, the pinned pool, and the payload patterns that validate them."""
