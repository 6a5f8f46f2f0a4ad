"""The reference's dataset classes: builders, the backend-flagged base, and one module per schema."""
