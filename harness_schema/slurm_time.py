"""Slurm's time formats (`slurm.time`, sbatch's --time): what a spec may give (`SLURM_TIME`,
settings' rule) and how many seconds it means (`time_seconds`: the job's limit, a point's
limit, the sweep's cost)."""

from __future__ import annotations

import re

SLURM_TIME = re.compile(r"^(\d+-)?(\d+)(:\d{2}){0,2}$")
"""minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS"""


def time_seconds(value: str | int) -> int:
    """Slurm's time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS."""
    if isinstance(value, int):
        return value * 60
    days = 0
    if "-" in value:
        d, value = value.split("-", 1)
        days = int(d)
        parts = [int(p) for p in value.split(":")]
        parts += [0] * (3 - len(parts))  # D-HH, D-HH:MM
        hours, minutes, seconds = parts
    else:
        parts = [int(p) for p in value.split(":")]
        if len(parts) == 1:
            hours, minutes, seconds = 0, parts[0], 0
        elif len(parts) == 2:
            hours, minutes, seconds = 0, parts[0], parts[1]
        else:
            hours, minutes, seconds = parts
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds
