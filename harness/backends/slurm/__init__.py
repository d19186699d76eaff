"""Slurm, as submitit's `slurm` subpackage holds it: everything the harness knows of Slurm.

- backend.py: the backend (one job array per submission) and the handle on its jobs;
- sbatch.py: the sbatch scripts (submitit's renderer), standalone and portable;
- queue.py: sacct and squeue, asked where the jobs stand;
- states.py: what a job's state means for its point, and job lists as scontrol takes them;
- accounting.py: what the scheduler leaves unsaid (a never-started task, a job's log).

Light to import (no submitit, no torch): `harness status` runs on a login node.
"""
