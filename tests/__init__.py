"""The test suite; a package, so its shared helpers are imported as ``tests.<module>``."""
