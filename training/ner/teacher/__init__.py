"""A larger NER teacher (trained where a GPU is) whose soft labels the shipped student learns."""
