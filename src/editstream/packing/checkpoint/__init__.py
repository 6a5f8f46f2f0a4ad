"""Checkpoint-by-reference: a packer's state in a few kilobytes that resumes bit for bit.

**What is saved.** Between two batches a packer holds samples in its buffer (parsed rows with
their image tensors) and the global RNGs (Python's ``random``, numpy's legacy generator, torch's
CPU generator) stand somewhere. Its state keeps no tensor: each buffered sample is a reference
(its group, its unit's place in the unit list, its row's position, its token count as a check,
:mod:`.references`), and the RNG points are a chain (:mod:`.chain`): where each referenced
sample's parse began, then where the stream is now, one literal Mersenne Twister key per
generator followed by word counts. Next to them: each group's ``data_status``, the seeds and the
layout (the reference run, :mod:`.formats`), or each logical stream's read position per group
(the elastic run, :mod:`.streams`, joined over ranks by :mod:`.merge`).

**How a buffered sample is recreated.** The loader's datasets speak one narrow interface
(:class:`~editstream.loader.origins.TracedDataset`): the packer iterates them with
``iter_with_origins(draw_point)``, so every sample comes with its origin (unit, row and the RNG
point :func:`.points.draw_point` took just before its parse); on restore it calls
``recreate_samples(origins, units, apply_point)``, which reads those rows again (each unit once,
from just before the first row wanted) and parses each after the RNGs were put back at its point.

**Why it is exact.** A sample is a function of its row and of the RNG states its parse starts
from; both are restored as they were, so the same tensors come back, and the stream goes on from
the saved current point. What could differ is refused, never approximated: a row that is gone or
parses into another token count raises :class:`~editstream.loader.origins.RecreateError`, and a
state over other data, another seed or another layout is rejected with the numbers that differ.
Numpy's cached second normal variate is the one thing a cheap point leaves out; a ``parse_row``
that draws it shows up as such a token-count refusal.

Modules: ``points`` (RNG points), ``chain`` (points as JSON), ``references`` (the buffer),
``formats`` (format names, checks, copies), ``streams`` (elastic stream states), ``merge``
(``merge_states``).
"""
