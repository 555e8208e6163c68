#!/usr/bin/env python3
"""Writes a synthetic recompilation log of N lines in the schema of docs/recompilation-log.md,
shaped like a long-running server's: mostly disk hits and compiles of a few known variants
(scale_tokens, so `precompile --from-log` can replay them), and many events of application
kernels this build does not know (skipped by the replay).

Usage: make_log.py LINES OUT [--known K]   (K distinct scale_tokens variants, default 4)"""
import argparse
import random


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("lines", type=int)
    parser.add_argument("out")
    parser.add_argument("--known", type=int, default=4)
    args = parser.parse_args()
    rng = random.Random(37)
    base = 1_764_600_000  # 2025-12-01
    with open(args.out, "w", buffering=1 << 20) as out:
        for i in range(args.lines):
            seconds = base + i // 50
            ts = "2026-12-01T%02d:%02d:%02d.%06dZ" % (
                (seconds // 3600) % 24, (seconds // 60) % 60, seconds % 60, (i * 7919) % 1000000)
            pid = 1000 + i % 16
            if i % 5 == 0:
                tokens = 1 + (i // 5) % args.known
                kernel, variant = "scale_tokens", '{"cols":64,"num_tokens":%d}' % tokens
                key = "%032x" % (tokens * 2654435761)
                policies = '{"cols":"exact","num_tokens":"exact"}'
            else:
                n = rng.randrange(4096)
                kernel, variant = "app_kernel_%d" % (n % 40), '{"tile":%d,"n":"dynamic"}' % n
                key = "%032x" % (n * 40503 + 17)
                policies = '{"tile":"exact","n":"dynamic"}'
            if i % 3 == 0:
                phase = "serving" if i > args.lines // 2 else "warmup"
                out.write('{"v":1,"ts":"%s","pid":%d,"event":"compile","kernel":"%s",'
                          '"variant":%s,"policies":%s,"key":"%s","ms":%.1f,"arch":"sm_90a",'
                          '"nvrtc":"13.0","reason":"new_variant","diff":[{"component":"n",'
                          '"cached":"1","requested":"2","policy":"exact"}],"phase":"%s"}\n'
                          % (ts, pid, kernel, variant, policies, key, 50 + rng.random() * 900,
                             phase))
            else:
                out.write('{"v":1,"ts":"%s","pid":%d,"event":"disk_hit","kernel":"%s",'
                          '"variant":%s,"policies":%s,"key":"%s","ms":%.2f,"layer":0}\n'
                          % (ts, pid, kernel, variant, policies, key, rng.random() * 3))


if __name__ == "__main__":
    main()
