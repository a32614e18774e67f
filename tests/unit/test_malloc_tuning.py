"""A broker process keeps megabyte blocks in its heap (strom.node.tune_malloc): receiving a
large frame after another must not cost a fresh mapping, page faults and zeroing each time."""
import subprocess
import sys
import textwrap

import pytest

from tests.integration.cluster import REPO_ROOT

ALLOCATE_GROWING_FRAMES = textwrap.dedent("""
    import resource, sys
    if sys.argv[1] == "tuned":
        from strom.node import tune_malloc
        assert tune_malloc()
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    before = faults()
    for i in range(200):  # each a little larger than the last: glibc's dynamic threshold trails
        frame = bytearray((1 << 20) + i * 4096)
        del frame
    print((faults() - before) / 200)
""")


def faults_per_frame(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", ALLOCATE_GROWING_FRAMES, mode], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=60, check=True)
    return float(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's")
def test_tuned_broker_reuses_heap_blocks_for_megabyte_frames():
    default, tuned = faults_per_frame("default"), faults_per_frame("tuned")
    assert default > 100, f"glibc's default policy no longer maps each frame afresh ({default} faults)"
    assert tuned < 20, f"{tuned} page faults per megabyte frame after tune_malloc"
