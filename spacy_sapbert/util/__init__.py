"""Small helpers every layer uses: crash-safe writers, versioned JSON files, text files, threads, devices."""
