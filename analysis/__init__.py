"""Read result folders and print the tables. Never imports torch: runs on a login node."""
