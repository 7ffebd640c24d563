"""Sandbox launcher: set resource limits, drop root, then exec the REPL driver.

Runs as the first process inside the sandbox (stdlib only, never imported by worldgen). Limits are set here
rather than in a `preexec_fn` (unsafe in a threaded parent) and apply to everything the driver starts.
When started as root, it switches to an unprivileged uid before exec: Linux never enforces RLIMIT_NPROC for
uid 0, and setuid from root to another uid clears every capability.

argv[1] is a JSON object: {"rlimits": {"RLIMIT_AS": bytes, ...}, "uid": int | null, "argv": [...]}.
"""

from __future__ import annotations

import json
import os
import resource
import sys


def main() -> None:
    config = json.loads(sys.argv[1])
    for name, value in config["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    uid = config.get("uid")
    if uid is not None and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if os.geteuid() == 0 or os.getuid() == 0:  # never run untrusted code as root
            sys.exit("sandbox launcher: could not drop root privileges")
    os.execv(config["argv"][0], config["argv"])


if __name__ == "__main__":
    main()
