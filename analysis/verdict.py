"""The caching ladder's verdict: per point and node, the rung table and one sentence naming the
stage that starves the device (000_*, 001_*).

Costs are compared in time per step, which adds up along the ladder (1/rate below − 1/rate
above is what the stage between two rungs costs), and shown as the throughput drop from the
rung above, as the article does. A stage is named only where its drop exceeds the noise: the
spread over repeats, or 10 % with a single repeat.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from tabulate import tabulate

from harness.config import rungs as rung_names

NOISE_FLOOR = (
    0.10  # relative drop treated as noise when there are no repeats to tell (2-core VMs jitter ~5 %)
)
KEEPS_UP = 0.90  # the bottom rung at >= 90 % of the bound: the pipeline keeps up
SATURATED = 0.90  # busy cores / allotted cores at which the CPU counts as saturated
FORMATS = {"terminal": "simple", "markdown": "github", "latex": "latex_booktabs", "csv": "tsv"}


@dataclass
class Verdict:
    hostname: str
    sweep_id: str
    point_id: str
    table: pd.DataFrame
    sentence: str
    stages: list[str] = field(default_factory=list)
    """The stages named, costliest first (what tests and notebooks read)."""
    caveats: list[str] = field(default_factory=list)


def ladder_verdicts(rows: pd.DataFrame) -> list[Verdict]:
    """One verdict per (node, sweep, point) that measured at least two rungs."""
    ok = rows[rows["status"] == "ok"].copy()
    if ok.empty:
        return []
    for column in ("training_time", "samples", "steps", "input_shapes", "loader_cores", "main_cores"):
        if column in ok:
            ok[column] = pd.to_numeric(ok[column], errors="coerce")
    out = []
    for (host, sweep, point), group in ok.groupby(["hostname", "sweep_id", "point_id"], sort=True):
        if group["rung"].nunique() < 2:
            continue
        out.append(_verdict(str(host), str(sweep), str(point), group))
    return out


def _per_rung(group: pd.DataFrame) -> pd.DataFrame:
    """Slowest rank per repeat, then the median over repeats, with the relative spread."""
    idx = group.groupby(["rung", "repeat"])["training_time"].idxmax()
    slowest = group.loc[idx].set_index(["rung", "repeat"])
    per_repeat = pd.DataFrame(
        {
            "steps_per_s": slowest["steps"] / slowest["training_time"],
            "samples_per_s": group.groupby(["rung", "repeat"])["samples"].sum() / slowest["training_time"],
            "gpu_util": pd.to_numeric(slowest.get("gpu_util"), errors="coerce"),
            "busy_cores": pd.to_numeric(slowest.get("loader_cores"), errors="coerce")
            + pd.to_numeric(slowest.get("main_cores"), errors="coerce"),
            "cpus_allotted": pd.to_numeric(slowest.get("cpus_allotted"), errors="coerce"),
            "input_shapes": slowest.get("input_shapes"),
        }
    ).reset_index()
    by_rung = per_repeat.groupby("rung")
    table = by_rung[["steps_per_s", "samples_per_s", "gpu_util", "busy_cores", "cpus_allotted"]].median()
    rate = by_rung["steps_per_s"]
    table["spread"] = ((rate.max() - rate.min()) / rate.median()).where(by_rung.size() > 1)
    table["input_shapes"] = by_rung["input_shapes"].max()
    table = table.reset_index()
    table["position"] = table["rung"].map(rung_names.ladder_position)
    return table.sort_values("position").reset_index(drop=True)


def _verdict(host: str, sweep: str, point: str, group: pd.DataFrame) -> Verdict:
    table = _per_rung(group)
    names = [n for n in str(group["transform_names"].iloc[0] or "").split(",") if n]
    on_cpu = (group["device"] == "cpu").all()
    bound = table.loc[0, "steps_per_s"]
    adds, drops, added = [""], [float("nan")], [float("nan")]
    for i in range(1, len(table)):
        above, below = table.loc[i - 1], table.loc[i]
        adds.append(stage_between(str(above["rung"]), str(below["rung"]), names))
        drops.append((above["steps_per_s"] - below["steps_per_s"]) / above["steps_per_s"])
        added.append(1 / below["steps_per_s"] - 1 / above["steps_per_s"])
    table["adds"], table["drop"], table["added_s"] = adds, drops, added
    table["of_bound"] = table["steps_per_s"] / bound

    named: list[tuple[float, str, str]] = []  # (seconds added, stage, clause)
    caveats: list[str] = []
    for i in range(1, len(table)):
        above, below = table.loc[i - 1], table.loc[i]
        if on_cpu and below["rung"] == "host_batch":
            continue  # no copy on a CPU device: any difference is noise
        noise = max(NOISE_FLOOR, _nan0(above["spread"]), _nan0(below["spread"]))
        if below["drop"] > noise:
            clause = f"{below['adds']}: −{below['drop']:.0%} ({below['rung']} vs {above['rung']})"
            named.append((below["added_s"], str(below["adds"]), clause))
            if below["busy_cores"] >= SATURATED * below["cpus_allotted"]:
                caveats.append(
                    f"the CPU was saturated on {below['rung']} ({below['busy_cores']:.1f} of "
                    f"{below['cpus_allotted']:.0f} cores busy): {below['adds']} may only have tipped it "
                    "over; another stage may be the one to optimise (001_*)"
                )
        elif below["drop"] < -noise:
            caveats.append(
                f"{below['rung']} is {-below['drop']:.0%} faster than {above['rung']} above it: "
                "noise, or caching changed the work (a cached sample of another size or content)"
            )
    named += _transforms_as_a_group(table, named)
    named.sort(key=lambda item: -item[0])
    bottom = table.iloc[-1]
    reach = f"{bottom['rung']} reaches {bottom['of_bound']:.0%} of the bound ({table.loc[0, 'rung']})"
    if not named and bottom["of_bound"] >= KEEPS_UP:
        sentence = f"the input pipeline keeps up: {reach}"
    elif not named:
        sentence = f"no single stage stands out above the noise; {reach}"
    else:
        sentence = "; ".join(clause for _, _, clause in named) + f". {reach}"
    if on_cpu and {"device_batch", "host_batch"} <= set(table["rung"]):
        caveats.append("device cpu: device_batch and host_batch measure the same thing; no copy is assessed")
    shapes = table["input_shapes"].max()
    if pd.notna(shapes) and shapes > 1:
        caveats.append(
            f"inputs vary in size ({int(shapes)} batch shapes seen): a single cached sample or batch "
            "may not reflect real steps (001_*)"
        )
    return Verdict(
        hostname=host,
        sweep_id=sweep,
        point_id=point,
        table=table,
        sentence=sentence,
        stages=[stage for _, stage, _ in named],
        caveats=caveats,
    )


def _transforms_as_a_group(
    table: pd.DataFrame, named: list[tuple[float, str, str]]
) -> list[tuple[float, str, str]]:
    """With transform:<k> cuts, each cut may sit under the noise while the transforms together
    clearly do not: then name them together, with their costliest step."""
    rungs = list(table["rung"])
    if "processed_sample" not in rungs or "raw_sample" not in rungs:
        return []
    top, bottom = rungs.index("processed_sample"), rungs.index("raw_sample")
    if bottom - top < 2 or any(stage.startswith("transform") for _, stage, _ in named):
        return []  # no cuts between them, or a single transform already named
    above, below = table.loc[top], table.loc[bottom]
    drop = (above["steps_per_s"] - below["steps_per_s"]) / above["steps_per_s"]
    noise = max(NOISE_FLOOR, *(_nan0(v) for v in table.loc[top:bottom, "spread"]))
    if drop <= noise:
        return []
    steps = table.loc[top + 1 : bottom]
    worst = steps.loc[steps["added_s"].idxmax()]
    clause = (
        f"transforms: −{drop:.0%} (raw_sample vs processed_sample), the most in "
        f"{worst['adds']} (−{worst['drop']:.0%})"
    )
    return [(1 / below["steps_per_s"] - 1 / above["steps_per_s"], "transforms", clause)]


def stage_between(above: str, below: str, transform_names: list[str]) -> str:
    """What a step on `below` pays that a step on `above` does not, in words."""
    stages = _elementary(transform_names)
    order = [rung for rung, _ in stages]
    start, end = order.index(above), order.index(below)
    labels = [label for _, label in stages[start + 1 : end + 1]]
    transforms = [label for label in labels if label.startswith("transform ")]
    words = [label for label in labels if not label.startswith("transform ")]
    if transforms:
        n = len(transform_names)
        if len(transforms) == n or not transform_names:
            group = "transforms"
        elif len(transforms) == 1:
            group = transforms[0]
        else:
            group = "transforms " + ", ".join(t.removeprefix("transform ") for t in reversed(transforms))
        # Transforms sit between the collation stage above them and the loading stages below.
        first = next(i for i, label in enumerate(labels) if label.startswith("transform "))
        words.insert(first, group)
    if "decoding" in words and "reading the stored bytes" in words:
        words = [w for w in words if w not in ("decoding", "reading the stored bytes")] + ["raw data loading"]
    return " + ".join(words)


def _elementary(transform_names: list[str]) -> list[tuple[str, str]]:
    """The ladder from the top, each rung with the one stage that separates it from the rung
    just above it when every rung is measured."""
    n = len(transform_names)
    stages: list[tuple[str, str]] = [
        ("device_batch", ""),
        ("host_batch", "host-to-device copy"),
        ("processed_sample", "collation and worker IPC"),
    ]
    if n:
        for k in range(n - 1, 0, -1):
            stages.append((f"transform:{k}", f"transform {k + 1}/{n} ({transform_names[k]})"))
        stages.append(("raw_sample", f"transform 1/{n} ({transform_names[0]})"))
    else:
        stages.append(("raw_sample", "transform all"))
    stages.append(("raw_bytes", "decoding"))
    stages.append(("full", "reading the stored bytes"))
    return stages


def _nan0(value: float) -> float:
    return 0.0 if pd.isna(value) else float(value)


def render_verdict(verdict: Verdict, fmt: str = "terminal") -> str:
    t = verdict.table
    shown = pd.DataFrame(
        {
            "rung": t["rung"],
            "adds": t["adds"],
            "steps/s": t["steps_per_s"].map(lambda v: f"{v:.2f}"),
            "samples/s": t["samples_per_s"].map(lambda v: f"{v:.1f}"),
            "% of bound": t["of_bound"].map(lambda v: f"{v:.0%}"),
            "drop": t["drop"].map(lambda v: "" if pd.isna(v) else f"{-v:+.0%}"),
            "s/step added": t["added_s"].map(lambda v: "" if pd.isna(v) else f"{v:+.4f}"),
        }
    )
    if t["spread"].notna().any():
        shown["spread"] = t["spread"].map(lambda v: "" if pd.isna(v) else f"{v:.0%}")
    if t["gpu_util"].notna().any():
        shown["gpu_util"] = t["gpu_util"].map(lambda v: "" if pd.isna(v) else f"{v:.0f}")
    if t["busy_cores"].notna().any():
        shown["busy cores"] = t["busy_cores"].map(lambda v: "" if pd.isna(v) else f"{v:.1f}")
    body = tabulate(shown, headers="keys", tablefmt=FORMATS[fmt], showindex=False, disable_numparse=True)
    lines = [f"caching ladder, node {verdict.hostname}, point {verdict.point_id}", body, verdict.sentence]
    lines += [f"caveat: {c}" for c in verdict.caveats]
    return "\n".join(lines)
