"""The loader: units -> rows -> ``parse_row`` -> samples, on either backend.

``units`` decides who reads what (listing rule, rank and worker splits), ``sources`` turn a
unit into rows (``parquet``, ``webdataset``), ``iteration`` is the one loop that parses rows
and keeps the resume status, ``drops`` counts what is dropped, ``datasets`` hold the
reference's dataset classes, ``transforms`` the image transform. vlm_sft adds ``video``
(``FrameSampler``), ``sft_sample`` (one JSONL line -> one sample) and ``prefetch`` (samples
fetched ahead in a known order). The loader uses the shared ``io`` and ``format`` layers and
never the converter.
"""
