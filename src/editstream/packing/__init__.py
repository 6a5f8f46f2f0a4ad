"""The packer: samples from weighted dataset groups -> packed sequences -> DataLoader batches.

``spec`` (every packing knob, defaults and validation once), ``config`` / ``dataloader`` (the NeMo /
BAGEL config surface, collate, factory, DataLoader), ``groups`` (group configs -> datasets),
``dataset`` (``PackedDataset``), ``runs`` (the reference run and elastic epochs), ``draws`` (drawing
samples from groups), ``accumulator`` / ``sequence`` (one packed sequence), ``checkpoint``
(checkpoint-by-reference). The packer reads samples from the loader's datasets.
"""
