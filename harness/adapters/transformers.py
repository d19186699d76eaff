"""Hugging Face transformers: its Trainer prepares its training loader with Accelerate (a
DataLoaderShard over the Trainer's own RandomSampler: the accelerate adapter shards the
probe's rungs as it does), and its models and tokenizers hand the step a `BatchEncoding` (a
dict of tensors: the harness copies and counts any mapping) and an output whose `loss` the
step reads (output.loss or output['loss'], read by the step whatever the model). Nothing of it
is asked of the core beyond that: this adapter recognises the library's objects."""

from __future__ import annotations

from typing import Any

from harness.adapters.base import NoAnswer, module_of


class Transformers(NoAnswer):
    name = "transformers"

    def recognises(self, thing: Any) -> bool:
        return module_of(thing) == "transformers"
