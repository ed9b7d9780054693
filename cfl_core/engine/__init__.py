"""The shared engine: federation tensors, batchable models, one training path."""
