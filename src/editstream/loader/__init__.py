"""The loader: the training datasets' side, units -> rows -> ``parse_row`` -> samples, on either backend.

``distributed`` and ``units`` split units over ranks and workers, ``iteration`` is the one loop for
every kind, ``datasets`` the shared dataset bases and the group registry; the rows come from
:mod:`editstream.data`. The loader never imports the converter.
"""
