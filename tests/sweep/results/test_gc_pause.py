"""The cycle collector's pauses: what they change inside the block, and that everything is as before after it."""
import gc

from sweep.results import gc_pause


class Cycle:
    def __init__(self):
        self.me = self


def test_sparse_collects_less_often_inside_and_puts_the_collector_back():
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    keep = [Cycle() for _ in range(100)]
    with gc_pause.sparse(12_345):
        assert gc.get_threshold() == (12_345, *before[1:])
        assert gc.get_freeze_count() >= len(keep)  # what lived at the start is out of the collections
        cycles = [Cycle() for _ in range(50)]
        del cycles
        assert gc.collect() >= 50  # cycles made inside are still collected
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_sparse_leaves_objects_another_block_froze_frozen(monkeypatch):
    gc.freeze()
    try:
        calls = []  # the frozen count itself moves as frozen objects are freed: what sparse does is asked instead
        monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
        monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
        with gc_pause.sparse():
            pass
        assert calls == []  # neither frozen again nor thawed: a driver's `long_lived` block still holds its objects
    finally:
        monkeypatch.undo()
        gc.unfreeze()
    with gc_pause.sparse():  # with nothing frozen, it freezes and thaws what it froze
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_paused_disables_the_collector_inside_only():
    assert gc.isenabled()
    with gc_pause.paused():
        assert not gc.isenabled()
    assert gc.isenabled()
