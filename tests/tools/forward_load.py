#!/usr/bin/env python3
"""How fast `/clusters` answers at the lease's holder and, forwarded, at a standby.

  tests/tools/forward_load.py HOLDER_PORT STANDBY_PORT URL [SECONDS]

Asks both instances (on 127.0.0.1) about URL with 4 threads for SECONDS (default 5) each,
alternating twice, one connection per question, and prints questions/s, the median and p99
latency and the status codes. Start the two with `neardup run --lease --http-listen
127.0.0.1:PORT --http-advertise http://127.0.0.1:PORT` on a loaded input topic, and pick a URL
the holder answers with 200. The client is Python: its own cost bounds both figures, so compare
the two, not the absolute rates. Only the standard library is used.
"""
import http.client
import sys
import threading
import time
import urllib.parse


def ask(port, path, seconds, threads=4):
    counts = [0] * threads
    latencies = [[] for _ in range(threads)]
    codes = {}
    stop = time.time() + seconds

    def worker(i):
        while time.time() < stop:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            t0 = time.perf_counter()
            c.request("GET", path)
            r = c.getresponse()
            r.read()
            latencies[i].append(time.perf_counter() - t0)
            codes[r.status] = codes.get(r.status, 0) + 1
            counts[i] += 1
            c.close()

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    all_l = sorted(x for l in latencies for x in l)
    return sum(counts) / seconds, all_l[len(all_l) // 2] * 1000, all_l[int(len(all_l) * 0.99)] * 1000, codes


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    holder, standby, url = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    seconds = float(sys.argv[4]) if len(sys.argv) == 5 else 5.0
    path = "/clusters?url=" + urllib.parse.quote(url, safe="")
    for rnd in range(2):
        for name, port in (("holder", holder), ("standby", standby)):
            qps, p50, p99, codes = ask(port, path, seconds)
            print(f"round {rnd + 1} {name:8s}: {qps:7.0f} questions/s, median {p50:.1f} ms, p99 {p99:.1f} ms, {codes}")


if __name__ == "__main__":
    main()
