"""Training the generative linker (GenBioEL): samples from the KB and from annotated mentions,
and the seq2seq training loop (on the self-alignment trainer's parts)."""
