"""Training the transformer NER (``sapbert ner-train``): settings (config), DocBin → windows with gold
tags (data), the checkpointed training loop with early stopping on dev (trainer)."""
