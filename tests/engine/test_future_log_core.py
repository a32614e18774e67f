"""The move of a replica between log dirs: its pure decisions (engine/log_move.py)."""
from engine.log_move import COPY, RESTART, SWAP, TRUNCATE, MoveStep, copy_delay_ms, next_step
from tests.purity import IO_CLOCK_RANDOMNESS, imports, top_level


def test_the_future_copies_from_its_end_while_the_current_has_more():
    assert next_step(0, 100, 40) == MoveStep(COPY, 40)


def test_the_future_replaces_the_current_once_their_ends_meet():
    assert next_step(0, 100, 100) == MoveStep(SWAP, 100)
    assert next_step(0, 0, 0) == MoveStep(SWAP, 0)


def test_a_current_truncated_under_the_future_truncates_it():
    assert next_step(0, 50, 80) == MoveStep(TRUNCATE, 50)


def test_a_diverged_epoch_truncates_the_future_to_where_it_ends_in_the_current():
    assert next_step(0, 120, 80, diverged_at=60) == MoveStep(TRUNCATE, 60)
    assert next_step(0, 120, 80, diverged_at=80) == MoveStep(COPY, 80)


def test_a_log_start_past_the_future_end_restarts_the_future_there():
    assert next_step(500, 900, 200) == MoveStep(RESTART, 500)


def test_the_copy_waits_so_its_bytes_stay_within_the_rate():
    assert copy_delay_ms(None, 10**9, 1) == 0
    assert copy_delay_ms(1000.0, 2000, 500) == 1500
    assert copy_delay_ms(1000.0, 2000, 3000) == 0
    assert copy_delay_ms(0.0, 0, 0) == 1000


def test_the_move_decisions_are_a_pure_core():
    assert not top_level(imports("engine", "log_move")) & IO_CLOCK_RANDOMNESS
