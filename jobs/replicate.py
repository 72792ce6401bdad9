"""spark-submit entry point for one flow: `spark-submit ... jobs/replicate.py --config FLOW.yaml`.

In cluster deploy mode the flow file arrives through `--files`, in the driver's working
directory under its base name, so that is where it is looked for when the path is absent.
"""

import os
import sys

from dr_stream.cli import main


def _config_path(argv: list[str]) -> list[str]:
    if "--config" in argv:
        i = argv.index("--config") + 1
        if i < len(argv) and not os.path.exists(argv[i]) and os.path.exists(os.path.basename(argv[i])):
            argv[i] = os.path.basename(argv[i])
    return argv


if __name__ == "__main__":
    sys.exit(main(["run", *_config_path(sys.argv[1:])]))
