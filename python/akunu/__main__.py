"""`python -m akunu`: the main job. For now it lists the Vulkan devices with their profiles and
runs the kernel self-check on the selected device (AKUNU_DEVICE or --device)."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="akunu", description=__doc__)
    parser.add_argument("command", nargs="?", default="info", choices=["info", "devices", "selfcheck", "kernel-bench", "tokenizer-bench", "decode-bench"],
                        help="info (default): devices, then the self-check; devices; selfcheck; "
                             "kernel-bench: copy and GEMV bandwidth; tokenizer-bench PATH: encode speed; "
                             "decode-bench FILE...: decode tok/s against the bandwidth floor")
    parser.add_argument("path", nargs="*", help="tokenizer-bench: tokenizer.json, model directory or GGUF; "
                                                "decode-bench: GGUF files")
    parser.add_argument("--tokens", type=int, default=128, help="decode-bench: tokens per file")
    parser.add_argument("--device", default="", help="device index or part of its name (default: AKUNU_DEVICE or best)")
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    args = parser.parse_args(argv)

    import akunu
    from akunu import selfcheck

    try:
        if args.command in ("info", "devices"):
            for d in akunu.devices():
                print(f"[{d['index']}] {d['description']}\n")
        if args.command in ("info", "selfcheck"):
            dev = akunu.Device(args.device)
            print(f"kernel self-check on {dev.name}")
            results = selfcheck.run(dev)
            print(selfcheck.format_table(results))
            failed = [r.kernel for r in results if not r.passed]
            if failed:
                print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
                return 1
            print("all kernels match NumPy")
        if args.command == "tokenizer-bench":
            from akunu import tokenizer_bench

            if len(args.path) != 1:
                parser.error("tokenizer-bench needs one PATH")
            r = tokenizer_bench.run(akunu.Tokenizer.from_file(args.path[0]))
            print(f"{r['bytes'] / 1e6:.2f} MB -> {r['tokens']:,} tokens in {r['seconds']:.3f} s: "
                  f"{r['mb_per_s']:.2f} MB/s, {r['tokens_per_s']:,.0f} tokens/s (one thread; first pass, "
                  f"cold word cache: {r['cold_mb_per_s']:.2f} MB/s)")
        if args.command == "decode-bench":
            from akunu import decode_bench

            if not args.path:
                parser.error("decode-bench needs GGUF files")
            bandwidth = decode_bench.copy_bandwidth(akunu.Device(args.device))
            rows = []
            for f in args.path:
                for chain in (1, 0):  # one token per submission, then the profile's chain
                    rows.append(decode_bench.run(f, args.tokens, bandwidth, chain))
                    print(f"{f} (chain {rows[-1]['chain']}): {rows[-1]['tok_per_s']:.1f} tok/s", flush=True)
            print(decode_bench.format_table(rows, bandwidth))
        if args.command == "kernel-bench":
            from akunu import kernel_bench

            dev = akunu.Device(args.device)
            scale = 1.0 if dev.profile["type"] != "cpu" else 1 / 16  # lavapipe: smaller problems
            print(f"kernel bandwidth on {dev.name}")
            print(kernel_bench.format_table(kernel_bench.run(dev, scale)))
    except akunu.Error as e:
        if args.debug:
            raise
        print(f"akunu: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
