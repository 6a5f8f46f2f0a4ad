"""The packer: samples from weighted dataset groups -> packed sequences -> DataLoader batches.

``config`` (the NeMo / BAGEL config surface), ``groups`` (group configs -> datasets),
``accumulator`` (one packed sequence, a typed accumulator), ``sequence`` (tensor helpers),
``state`` (resume), ``dataset`` (``PackedDataset``) and ``dataloader`` (collate, factory,
DataLoader). The packer reads samples from the loader's datasets.
"""
