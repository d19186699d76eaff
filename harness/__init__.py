"""Benchmark PyTorch input pipelines: the caching ladder and the DataLoader grid, per node."""

__version__ = "0.1.0"
