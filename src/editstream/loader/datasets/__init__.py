"""The shared dataset bases: the sample builder (``interleave``), the backend-flagged base (``standard``),
what a constructor takes (``parameters``) and the group registry built from ``editstream.kinds``."""
