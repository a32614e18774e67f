"""kafka-consumer-groups' reset plan CSV (exportOffsetsToCsv, parseResetPlan): one group's
lines are topic,partition,offset, several groups' group,topic,partition,offset; a line that is
neither is refused naming its number."""
import pytest

from strom.reset_plan import ResetPlanError, export_csv, parse_reset_plan

PLAN = {"orders-app": {("orders", 0): 5, ("orders", 1): 7}}


def test_one_groups_export_is_topic_partition_offset_and_reads_back_for_that_group():
    text = export_csv(PLAN, single_group=True)
    assert text == "orders,0,5\norders,1,7\n"
    assert parse_reset_plan(text, ["orders-app"]) == PLAN


def test_several_groups_export_names_the_group_on_each_line_and_reads_back():
    plan = {**PLAN, "billing": {("orders", 0): 1}}
    text = export_csv(plan, single_group=False)
    assert text == "orders-app,orders,0,5\norders-app,orders,1,7\nbilling,orders,0,1\n"
    assert parse_reset_plan(text, ["orders-app", "billing"]) == plan
    assert parse_reset_plan(text, ["orders-app"]) == plan  # four fields: the groups of the file


@pytest.mark.parametrize("text, line", [
    ("orders,0,5\norders,x,7\n", 2),
    ("orders,0,5\n\norders,1\n", 3),
    ("orders,0,-1\n", 1),
])
def test_a_malformed_line_is_refused_naming_it(text, line):
    with pytest.raises(ResetPlanError, match=rf"^line {line} of the reset plan is not topic,"):
        parse_reset_plan(text, ["g"])
