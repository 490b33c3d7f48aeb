"""One deployment of a Pulumi program under the mini engine, in a process of its own (the SDK keeps
global state): ``pulumi_deploy.py MODE --program DIR --state FILE --config JSON [--secret KEY ...]``.

MODE is ``preview``, ``up``, ``refresh`` or ``destroy``. Prints one JSON line: the steps taken
(``[op, resource name]``), the stack outputs and the error, if the deployment failed.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mini_engine import MiniEngine, run_program


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["preview", "up", "refresh", "destroy"])
    parser.add_argument("--program", type=Path, required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--config", default="{}")
    parser.add_argument("--secret", action="append", default=[])
    parser.add_argument("--project", default="proj")
    parser.add_argument("--stack", default="dev")
    args = parser.parse_args()
    config = json.loads(args.config)
    program = args.program.resolve()
    os.chdir(program)
    sys.path.insert(0, str(program))
    engine = MiniEngine(args.state, config, args.secret, preview=args.mode == "preview",
                        project=args.project, stack=args.stack, cwd=program)
    result: dict[str, object] = {"outputs": {}, "error": None}
    try:
        if args.mode == "refresh":
            engine.refresh()
        elif args.mode == "destroy":
            engine.destroy()
        else:
            try:
                result["outputs"] = run_program(
                    engine, lambda: runpy.run_path(str(program / "__main__.py"), run_name="__main__"),
                    config, args.secret)
            except Exception as exc:
                result["error"] = "; ".join(engine.errors) or f"{type(exc).__name__}: {exc}"
            engine.finish(succeeded=result["error"] is None)
    except Exception as exc:  # a failed delete or read: reported like the CLI reports it
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        engine.close()
    result["log"] = engine.log
    print(json.dumps(result))


if __name__ == "__main__":
    main()
