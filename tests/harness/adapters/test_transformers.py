"""The transformers adapter recognises the library's objects; its Trainer's loader is
Accelerate's, sharded by that adapter (tests/jobs/test_hf_trainer_train.py runs it)."""

from __future__ import annotations

from harness.adapters.transformers import Transformers


def test_it_recognises_the_librarys_objects_only() -> None:
    class BatchEncoding(dict):  # type: ignore[type-arg]
        pass

    BatchEncoding.__module__ = "transformers.tokenization_utils_base"
    assert Transformers().recognises(BatchEncoding())
    assert not Transformers().recognises({})
    assert Transformers().sharding(BatchEncoding()) is None
