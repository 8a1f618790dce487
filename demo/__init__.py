"""Gradio demo of spacy-sapbert."""
