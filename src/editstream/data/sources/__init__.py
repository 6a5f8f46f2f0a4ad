"""Row sources, one per backend: list units, then stream the rows of one unit.

``parquet``, ``webdataset`` and ``foreign`` stream the rows of row-group / file / shard units;
``jsonl`` and ``sft_shards`` give JSONL-line units (one row each) and each line's media, from
the JSONL and media files or from converted shards.
"""
