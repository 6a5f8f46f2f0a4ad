"""The loader: units -> rows -> ``parse_row`` -> samples, for every dataset kind, on either backend.

``units`` decides who reads what (listing rule, rank and worker splits), ``sources`` turn a
unit into rows (``parquet``, ``webdataset``, ``foreign``, and JSONL lines from ``jsonl`` or
``sft_shards``), ``rows`` is what a source hands over, ``iteration`` is the one loop that
parses rows, keeps the resume status and the failure budgets, ``reasons`` judges why a row
failed, ``drops`` counts what is dropped, ``backends`` is the one table of ``backend`` values,
``datasets`` hold the shared dataset bases and the group registry (built from
``editstream.kinds``; each kind's dataset class lives in its ``kinds/<name>/`` package),
``transforms`` the image transform. JSONL-line datasets add ``video``
(``FrameSampler``), ``sft_sample`` (one line -> one sample) and ``prefetch`` (samples fetched
ahead in a known order). The loader uses the shared ``io``, ``format`` and ``kinds`` layers
and never the converter.
"""
