"""`python -m bench [NAME ...]` (`make bench`): the benchmarks of bench.BENCHMARKS (or those named), one after
another, each in a process of its own with its default arguments; stops at the first that fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench import BENCHMARKS


def main(names: list[str]) -> int:
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        print(f"not a benchmark: {', '.join(unknown)}; the benchmarks are: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    for name in names or BENCHMARKS:
        script = Path(__file__).resolve().parent / f"{name}.py"
        print(f"== bench/{name}.py", flush=True)
        status = subprocess.call([sys.executable, str(script)])
        if status:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
