"""`python -m tests.fuzz -n N`: run N fuzz cases (seeds START..START+N-1) and print the counts
per class and per back end; exit status 1 if any case failed.

`python -m tests.fuzz --show SEED [--backend B]`: print the case of SEED as a script to paste.
`python -m tests.fuzz --run SEED`: run one case here, in this process, and print each back end's
result.
"""

from __future__ import annotations

import argparse
import datetime
import sys

from tests.fuzz import program, runner


def _run_one(seed: int, hexagon_every: int) -> int:
    import loom
    from tests.fuzz import oracle

    case, exp = program.make_case(seed, hexagon_every)
    print(program.to_code(case))
    s, args = program.build_schedule(case)
    session = loom.device("hexagon-sim", timeout=120) if case["hexagon"] else None
    failed = 0
    try:
        for backend in program.backends(case):
            try:
                fn = program.compile_for(backend, s, args, case, session)
                arrays = program.arrays_for(exp, case)
                fn(*arrays)
                if backend == "hexagon":
                    fn.loaded.unload()
                result = oracle.compare(arrays[-1], exp) or "ok"
            except Exception as e:
                result = f"{type(e).__name__}: {e}"
            failed += result != "ok"
            print(f"{backend}: {result}")
    finally:
        if session is not None:
            session.close()
    return 1 if failed else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fuzz", description=__doc__.split("\n")[0]
    )
    parser.add_argument("-n", "--cases", type=int, default=300, help="number of cases (300)")
    parser.add_argument("--start", type=int, default=0, help="first seed (0)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (2)")
    parser.add_argument(
        "--hexagon-every",
        type=int,
        default=program.HEXAGON_EVERY,
        help=f"about 1 case in K also runs on Hexagon ({program.HEXAGON_EVERY}; 0: never)",
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per back end (120)")
    parser.add_argument("--show", type=int, metavar="SEED", help="print the case of SEED")
    parser.add_argument("--backend", choices=program.BACKENDS, help="the back end --show runs")
    parser.add_argument("--run", type=int, metavar="SEED", help="run the case of SEED here")
    args = parser.parse_args(argv)
    if args.cases < 1 or args.workers < 1 or args.hexagon_every < 0:
        parser.error("-n and --workers must be at least 1, --hexagon-every at least 0")
    if args.show is not None:
        case, _ = program.make_case(args.show, args.hexagon_every)
        if args.backend == "hexagon" and case["hexagon"] is None:
            parser.error(
                f"case {args.show} does not run on Hexagon with --hexagon-every "
                f"{args.hexagon_every}: give the --hexagon-every its run used"
            )
        print(program.reproduction(case, args.backend, args.hexagon_every), end="")
        return 0
    if args.run is not None:
        return _run_one(args.run, args.hexagon_every)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = (
        runner.fuzz_dir() / f"failures-{stamp}-seeds-{args.start}-{args.start + args.cases - 1}.txt"
    )
    seeds = range(args.start, args.start + args.cases)
    print(
        f"fuzz: {args.cases} cases (seeds {seeds[0]}..{seeds[-1]}), {args.workers} workers, "
        f"back ends interp llvm c, and hexagon on about 1 case in {args.hexagon_every or 'never'}",
        flush=True,
    )
    summary = runner.run(
        seeds,
        workers=args.workers,
        hexagon_every=args.hexagon_every,
        step_timeout=args.timeout,
        hexagon_timeout=max(args.timeout, 300.0),
        progress=lambda line: print(line, flush=True),
        failures_path=path,
    )
    print()
    print(summary.table())
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
