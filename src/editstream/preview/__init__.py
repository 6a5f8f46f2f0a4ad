"""Pictures of a dataset: edit chains, T2I pairs and vlm_sft conversations as HTML or a PNG contact sheet."""
