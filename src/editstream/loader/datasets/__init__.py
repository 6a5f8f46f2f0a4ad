"""The reference's dataset classes: builders, the backend-flagged base, one module per dataset kind
(``edit``, ``text_to_image``, ``sft``), and the group registry built from ``editstream.kinds``."""
