"""Host-side figures of a rank: memory of its process tree (the DataLoader workers included)."""

from __future__ import annotations

import psutil


def process_tree_memory_bytes(pid: int | None = None) -> int:
    """Memory of a process and its descendants.

    Proportional set size (PSS) where the OS gives it: forked DataLoader workers share the
    parent's pages copy-on-write, and summing their RSS would count those pages once per
    worker. Falls back to RSS elsewhere.
    """
    root = psutil.Process(pid)
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            try:
                total += proc.memory_full_info().pss
            except (AttributeError, psutil.AccessDenied):
                total += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue  # a worker that exited between listing and reading
    return total
