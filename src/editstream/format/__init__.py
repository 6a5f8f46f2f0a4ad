"""On-disk formats shared by the converter (writers) and the loader (readers): tar shards,
``.tar.idx`` offsets, ``manifest.json``, the row codec, sample keys and image headers.
Each on-disk fact has one owner here, with its writer and reader side by side."""
