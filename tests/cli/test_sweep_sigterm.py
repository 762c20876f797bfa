"""SIGTERM stops any level within a second, an open-loop level waiting on a far arrival
too; the finished levels stay in the result file (issue 20)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def test_sigterm_stops_a_level_waiting_on_a_far_arrival(tmp_path):
    out = tmp_path / "r.json"
    # level 1 (c=1) finishes; level 2 (rate 0.001/s) waits ~1000 s for its 2nd arrival
    cmd = [sys.executable, "-m", "perfkit", "sweep", "--concurrency", "1",
           "--rate", "0.001", "--requests", "2", "--warmup", "0", "--no-samplers",
           "--device", "cpu", "--json", str(out), "--format", "json"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the result file holds level 1 when it is done
            if out.exists() and json.loads(out.read_text()).get("levels"):
                break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.1)
        time.sleep(0.5)  # level 2 is now waiting on its second arrival
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        stopped = time.monotonic() - sent
    finally:
        proc.kill()
    err = proc.stderr.read() if proc.stderr else ""
    assert code == 130, err
    assert stopped < 5.0, stopped  # < 1 s to stop the level; the rest is interpreter exit
    assert "Stopping now" in err and "Traceback" not in err
    doc = json.loads(out.read_text())
    assert [(lv["concurrency"], lv["rate"]) for lv in doc["levels"]] == [(1, None)]
    assert doc["complete"] is False
