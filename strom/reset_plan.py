"""kafka-consumer-groups' reset plan as CSV: what ``--reset-offsets --export`` prints and
``--reset-offsets --from-file FILE`` reads (ConsumerGroupCommand's exportOffsetsToCsv and
parseResetPlan).

With one ``--group`` a line is ``topic,partition,offset``; with several (or ``--all-groups``)
``group,topic,partition,offset``. A plan is ``{group: {(topic, partition): offset}}``, the shape
strom/consumer_groups.py resets with. A line that is neither gives ResetPlanError naming its
number and text.
"""
from __future__ import annotations

Plan = dict[str, dict[tuple[str, int], int]]


class ResetPlanError(ValueError):
    """A reset plan's line that does not parse; the message names the line."""


def export_csv(plan: Plan, single_group: bool) -> str:
    """Each offset of ``plan`` as a CSV line (each ended by a newline, as Kafka's CSV writer)."""
    out = []
    for group, offsets in plan.items():
        for (topic, partition), offset in offsets.items():
            fields = (topic, partition, offset) if single_group else (group, topic, partition, offset)
            out.append(",".join(str(f) for f in fields) + "\n")
    return "".join(out)


def parse_reset_plan(text: str, groups: list[str]) -> Plan:
    """The plan a CSV file holds. With exactly one group named and three fields on the first
    line, every line is ``topic,partition,offset`` for that group; otherwise every line is
    ``group,topic,partition,offset``. Blank lines are skipped."""
    lines = [(n, line.strip()) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    single = len(groups) == 1 and bool(lines) and len(lines[0][1].split(",")) == 3
    expected = "topic,partition,offset" if single else "group,topic,partition,offset"
    plan: Plan = {}
    for n, line in lines:
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != (3 if single else 4):
            raise ResetPlanError(f"line {n} of the reset plan is not {expected}: {line!r}")
        group = groups[0] if single else fields.pop(0)
        topic, partition, offset = fields
        try:
            key, value = (topic, int(partition)), int(offset)
        except ValueError:
            raise ResetPlanError(f"line {n} of the reset plan is not {expected} (partition and offset are "
                                 f"numbers): {line!r}") from None
        if not group or not topic or key[1] < 0 or value < 0:
            raise ResetPlanError(f"line {n} of the reset plan is not {expected}: {line!r}")
        plan.setdefault(group, {})[key] = value
    return plan
