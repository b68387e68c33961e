#!/usr/bin/env python3
"""elastic.py for CloudAI's NixlEP workload: runs hyrun's ep-elastic with the same arguments.

CloudAI executes `python_executable elastic_script --plan ... --num-processes K [--tcp-server ADDR]`;
pointing elastic_script at this file runs hyrun's benchmark unchanged (docs/ep-bench.md).
ep-elastic is looked up in $HYRUN_EP_ELASTIC, then beside this file, then on PATH.
"""
import os
import shutil
import sys


def main() -> None:
    here = os.path.dirname(os.path.realpath(__file__))
    candidates = [os.environ.get("HYRUN_EP_ELASTIC", ""), os.path.join(here, "ep-elastic"), shutil.which("ep-elastic") or ""]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            os.execv(path, [path] + sys.argv[1:])
    sys.stderr.write("elastic.py: ep-elastic not found beside this file, in HYRUN_EP_ELASTIC or on PATH\n")
    sys.exit(2)


if __name__ == "__main__":
    main()
