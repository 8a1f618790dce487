"""The spaCy components and loaders only: the linker pipe, abbreviations, NER, GenBioEL, the tokenizer."""
