"""Checkpoint-by-reference: a packer's state in a few kilobytes that resumes bit for bit.

**What is saved.** No tensor: each buffered sample is a reference (group, unit, row position, token count as a
check; :mod:`.references`), and the global RNGs (Python's, numpy's legacy one, torch's CPU one) a chain of points
(:mod:`.chain`): where each buffered sample's parse began, then where the stream is now. Beside them, each group's
``data_status``, the seeds and the layout (reference run, :mod:`.formats`), or each logical stream's positions
(elastic run, :mod:`.streams`, joined over ranks by :mod:`.merge`).

**How a sample is recreated.** Through the loader's one narrow interface,
:class:`~editstream.loader.origins.TracedDataset`: ``iter_with_origins(draw_point)`` gives each sample with its
origin (unit, row, the RNG point just before its parse); ``recreate_samples`` parses those rows again from there.

**Why it is exact.** A sample is a function of its row and the RNG states its parse starts from, and both come
back as they were. What could differ is refused, never approximated: a row gone or parsed to another token count
raises :class:`~editstream.loader.origins.RecreateError` (numpy's cached normal variate, which a point leaves out,
shows up that way), and a state over other data, seed or layout is rejected with the numbers that differ.
"""
