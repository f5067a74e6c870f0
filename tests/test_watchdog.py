"""The watchdog: a rank stuck inside MPI in a layer ends with one line; a busy one does not.

Each case runs in a subprocess (the watchdog ends its process), with a fake
communicator (3 ranks: 0 and 1 on host "a", 2 on host "b") and a function named like
the engine's solve, in the script the watchdog is told is the async engine.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys, time
from dssfn_mpi.run import watchdog

class Comm:
    def allgather(self, x): return ["a", "a", "b"]
    def bcast(self, x): return "t0ken"
    def Get_rank(self): return 0

class Box:
    puts = 0

watchdog._ENGINE = __file__
watchdog.GRACE = 0.5
out = sys.argv[2] if len(sys.argv) > 2 else None
box = Box()
w = watchdog.PutWatchdog(Comm(), box, [1, 2], timeout=2.0, out=out)

def solve(layer, moving):
    t0 = time.monotonic()
    while time.monotonic() - t0 < 4.0:
        time.sleep(0.05)
        box.puts += moving  # puts completing, or a flush that never returns

solve(3, int(sys.argv[1]))
w.stop()
print("finished")
"""


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "stuck.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, str(script), *args], capture_output=True,
                          text=True, timeout=60)


def test_a_stuck_rank_ends_naming_the_neighbours_on_other_hosts(tmp_path):
    res = _run(tmp_path, "0")
    assert res.returncode == 1 and "finished" not in res.stdout, res
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("dssfn-mpi: error: rank 0 (a): layer 3: stuck inside MPI for "
                               ), lines[0]
    assert lines[0].endswith("rank(s) 2 (b) lost (host down or unreachable); ending this rank")


def test_puts_that_complete_are_left_alone(tmp_path):
    res = _run(tmp_path, "1")
    assert res.returncode == 0 and "finished" in res.stdout and not res.stderr, res


def test_one_rank_per_host_speaks(tmp_path):
    out = tmp_path / "run.h5"
    Path(f"{out}.ckpt").mkdir()
    first, second = _run(tmp_path, "0", str(out)), _run(tmp_path, "0", str(out))
    assert first.returncode == second.returncode == 1
    assert "rank(s) 2 (b) lost" in first.stderr and not second.stderr
