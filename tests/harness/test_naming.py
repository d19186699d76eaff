from __future__ import annotations

from torch import nn

from harness.naming import type_name
from tests.fixtures.pipelines import PlainStream


def test_a_users_class_is_named_with_its_module_and_builtins_stay_short() -> None:
    assert type_name(PlainStream(4)) == "tests.fixtures.pipelines.PlainStream"
    assert type_name(nn.Linear(1, 1)) == "torch.nn.modules.linear.Linear"
    assert type_name((1, 2)) == "tuple" and type_name({}) == "dict"
