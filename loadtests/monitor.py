"""Prints, every INTERVAL seconds, the CPU each kind of process on this
machine used over the interval (roncho by role, Postgres, Qdrant, NATS, the
load clients) and the state of a Qdrant collection (points, indexed vectors
— dense and sparse counted apart — segments, status): where the cores went
during a benchmark's phases.

    python3 loadtests/monitor.py QDRANT_HTTP_URL/collections/NAME [INTERVAL]
"""
import json
import os
import sys
import time
import urllib.request

HZ = os.sysconf("SC_CLK_TCK")


def kind(comm, cmdline):
    if comm == "roncho":
        return "roncho:" + (cmdline.split("--roles ")[1].split()[0] if "--roles " in cmdline else "serve")
    if comm.startswith("postgres"):
        return "postgres"
    for part, name in (("qdrant", "qdrant"), ("nats", "nats"), ("roncho-loadtes", "loadtest")):
        if part in comm:
            return name
    return "other"


def cpu_ticks():
    ticks = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = open(f"/proc/{pid}/comm").read().strip()
            cmdline = open(f"/proc/{pid}/cmdline").read().replace("\0", " ")
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = kind(comm, cmdline)
        ticks[name] = ticks.get(name, 0) + int(fields[11]) + int(fields[12])
    return ticks


def collection(url):
    try:
        info = json.load(urllib.request.urlopen(url, timeout=5))["result"]
    except Exception as error:  # the collection may not exist yet
        return f"qdrant: {error}"
    return (
        f"points {info.get('points_count')} indexed {info.get('indexed_vectors_count')} "
        f"segments {info.get('segments_count')} {info.get('status')}"
    )


def main():
    url = sys.argv[1]
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 15.0
    before, at = cpu_ticks(), time.time()
    while True:
        time.sleep(interval)
        now, now_at = cpu_ticks(), time.time()
        shares = {name: (now.get(name, 0) - before.get(name, 0)) / HZ / (now_at - at) * 100 for name in now}
        before, at = now, now_at
        used = " ".join(f"{name} {share:.0f}%" for name, share in sorted(shares.items()) if share >= 1)
        print(time.strftime("%H:%M:%S"), used, "|", collection(url), flush=True)


if __name__ == "__main__":
    main()
