"""Datasets and models to benchmark: the seed workloads and a user's own factories."""
