"""Pictures of a dataset: each row drawn by its kind's preview function, as HTML or a PNG contact sheet."""
