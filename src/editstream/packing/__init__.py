"""The packer: samples from weighted dataset groups -> packed sequences -> DataLoader batches."""
