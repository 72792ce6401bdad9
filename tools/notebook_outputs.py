"""`python -m tools.notebook_outputs`: runs the demo, then the offset-index notebook against the
demo's dc1-to-dc2 flow, and saves the notebook with its outputs, so a reader on a code host sees
the tables and the lag plot of a real run.

The demo runs on clusters of its own (ports 33092 and 33192, under a temporary home), which it
starts and stops by PID; nothing of `dr-stream dev up` is touched. The test suite still executes
the notebook against a run of its own (`TestNotebook`); this only refreshes what is committed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import yaml
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "offset_index.ipynb"
PORTS = "33092,33192"


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="dr-stream-notebook-") as home:
        demo = subprocess.run([sys.executable, "-m", "dr_stream.dev.demo", "--ports", PORTS, "--home", home],
                              cwd=ROOT)
        if demo.returncode != 0:
            print(f"the demo failed (exit {demo.returncode}); the notebook is left as it was", file=sys.stderr)
            return demo.returncode
        state = Path(home) / "flows" / "dc1-to-dc2"
        flow = Path(home) / "dc1-to-dc2.yaml"
        flow.write_text(yaml.safe_dump({
            "name": "dc1-to-dc2",
            "source": {"alias": "dc1", "bootstrap_servers": f"127.0.0.1:{PORTS.split(',')[0]}"},
            "destination": {"alias": "dc2", "bootstrap_servers": f"127.0.0.1:{PORTS.split(',')[1]}"},
            "streaming": {"checkpoint_dir": str(state / "checkpoints"), "offset_index": str(state / "offset-index"),
                          "translations": str(state / "translations")},
        }))
        notebook = nbformat.read(NOTEBOOK, as_version=4)
        os.environ["DR_STREAM_CONFIG"] = str(flow)
        NotebookClient(notebook, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(ROOT)}}).execute()
    nbformat.write(notebook, NOTEBOOK)
    outputs = sum(len(cell.get("outputs", [])) for cell in notebook.cells)
    print(f"{NOTEBOOK}: saved with {outputs} outputs of a run on the demo's data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
