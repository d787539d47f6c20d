"""The crash fuzzer (tools/fuzz.py) for a bounded time with a fixed seed: no
random call or autograd program may crash or hang ember (each batch runs in a
memory- and time-limited child process). EMBER_FUZZ_SECONDS sets the length
(default 60; 0 skips)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECONDS = float(os.environ.get("EMBER_FUZZ_SECONDS", "60"))


@pytest.mark.skipif(SECONDS <= 0, reason="EMBER_FUZZ_SECONDS=0")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses resource limits of Linux")
def test_fuzz_finds_no_crash_or_hang(tmp_path):
    report = tmp_path / "fuzz.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fuzz.py"), "--seconds", str(SECONDS),
                        "--seed", "0", "--json", str(report), "--hang-seconds", "60"],
                       capture_output=True, text=True, env=env, timeout=SECONDS * 6 + 600)
    assert report.exists(), r.stdout[-2000:] + r.stderr[-2000:]
    total = json.loads(report.read_text())
    assert total["calls"] > 0
    found = [(f["status"], f["reproducer"] or f["last_program"]) for f in total["crashes"] + total["hangs"]]
    assert not found, "\n".join(f"{s}: {src}" for s, src in found)
    internal = [src for src, _ in total["internal"]]
    assert not internal, "SystemError from:\n" + "\n".join(internal[:10])
