"""Row sources, one per backend: list units, then stream the rows of one unit."""
