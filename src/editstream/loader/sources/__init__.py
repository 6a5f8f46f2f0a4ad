"""Sources, one per backend: list units, then read them.

``parquet`` and ``webdataset`` stream the rows of row-group / file / shard units;
``jsonl`` and ``sft_shards`` give vlm_sft's JSONL lines and each line's media, from the JSONL
and media files or from converted shards.
"""
