"""Self-alignment training: pairs, the trainer, checkpoints."""
