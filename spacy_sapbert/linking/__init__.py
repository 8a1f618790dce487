"""Mention strings to ranked KB concepts, without spaCy: the first stage, settings, type filter, calibration."""
