"""Qdrant's own time for the queries of a roncho search, against a
collection roncho made (docs/benchmarks.md, issue 36).

    qdrant_queries.py probe URL COLLECTION [variant...]
        Times a dense and a sparse query (filter on the namespace, limit 50,
        the `rid` payload: what a search sends), one client, 150 each, for
        each variant: base, nofilter, ef64, nopayload, norescore.

    qdrant_queries.py layouts URL COLLECTION N ALTERNATIVE
        Copies N of COLLECTION's points into two new collections, `ab_base`
        (roncho's layout) and `ab_ALTERNATIVE`, lets Qdrant index both at
        once, and reports each one's optimizer time and query times
        (alternatives: per-namespace, a graph per namespace and session
        only; payload-in-ram). Both are dropped at the end.

URL is Qdrant's REST URL (run-scale.sh's Qdrant prints its gRPC one; the
REST port is the other).
"""
import json
import random
import sys
import time
import urllib.request


def call(url, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, method=method, data=data, headers={"content-type": "application/json"})
    return json.load(urllib.request.urlopen(request, timeout=600))


def quantile(values, fraction):
    return sorted(values)[int(fraction * (len(values) - 1))]


def sample(url, collection, count):
    body = {"limit": count, "with_vector": True, "with_payload": True}
    return call(url, "POST", f"/collections/{collection}/points/scroll", body)["result"]["points"]


def query_body(point, kind, variant="base", rng=random):
    """The query a search sends, near `point` (dense) or on two of its words (sparse)."""
    must = [{"key": "ns", "match": {"value": point["payload"]["ns"]}}]
    if kind == "dense-session":
        must.append({"key": "session", "match": {"value": point["payload"]["session"]}})
    if kind == "sparse":
        words = point["vector"]["text"]
        picked = rng.sample(range(len(words["indices"])), min(2, len(words["indices"])))
        query = {"indices": [words["indices"][i] for i in picked], "values": [words["values"][i] for i in picked]}
        body = {"query": query, "using": "text"}
    else:
        body = {"query": [x + rng.gauss(0, 0.02) for x in point["vector"][""]]}
    body.update({"limit": 50, "filter": {"must": must}, "with_payload": ["rid"]})
    if variant == "nofilter":
        body.pop("filter")
    elif variant == "nopayload":
        body["with_payload"] = False
    elif variant == "ef64" and kind != "sparse":
        body["params"] = {"hnsw_ef": 64}
    elif variant == "norescore" and kind != "sparse":
        body["params"] = {"quantization": {"rescore": False}}
    return body


def probe(url, collection, variants):
    rng = random.Random(7)
    points = sample(url, collection, 300)
    rng.shuffle(points)
    for variant in variants or ["base"]:
        for kind in ("dense", "sparse"):
            server, client = [], []
            for point in points[:150]:
                started = time.perf_counter()
                out = call(url, "POST", f"/collections/{collection}/points/query", query_body(point, kind, variant, rng))
                client.append((time.perf_counter() - started) * 1e3)
                server.append(out["time"] * 1e3)
            print(
                f"{variant:10} {kind:6} server p50 {quantile(server, .5):6.2f} p95 {quantile(server, .95):6.2f}"
                f" | client p50 {quantile(client, .5):6.2f} p95 {quantile(client, .95):6.2f} ms"
            )


# roncho's layout (adapters/roncho-qdrant, `create`) and the alternatives tried.
BASE = {"hnsw": {}, "graphs": {"ns": True, "session": True, "peer": True, "level": True}, "params": {}}
ALTERNATIVES = {
    "per-namespace": {
        "hnsw": {"m": 0, "payload_m": 16},
        "graphs": {"ns": True, "session": True, "peer": False, "level": False},
        "params": {},
    },
    "payload-in-ram": {**BASE, "params": {"on_disk_payload": False}},
}


def layouts(url, source, count, alternative):
    chosen = {"base": BASE, alternative: ALTERNATIVES[alternative]}
    for name, layout in chosen.items():
        collection = f"ab_{name}"
        vectors = {"size": 384, "distance": "Cosine", "quantization_config": {"scalar": {"type": "int8", "always_ram": True}}}
        body = {"vectors": vectors, "sparse_vectors": {"text": {}}, "hnsw_config": layout["hnsw"], **layout["params"]}
        call(url, "PUT", f"/collections/{collection}", body)
        for field, graphs in layout["graphs"].items():
            schema = {"type": "keyword", "is_tenant": field == "ns", "enable_hnsw": graphs}
            call(url, "PUT", f"/collections/{collection}/index?wait=true", {"field_name": field, "field_schema": schema})
    offset, copied = None, 0
    while copied < count:
        body = {"limit": 1000, "offset": offset, "with_vector": True, "with_payload": True}
        page = call(url, "POST", f"/collections/{source}/points/scroll", body)["result"]
        points = [{"id": p["id"], "vector": p["vector"], "payload": p["payload"]} for p in page["points"]]
        for name in chosen:
            call(url, "PUT", f"/collections/ab_{name}/points?wait=true", {"points": points})
        copied += len(points)
        offset = page["next_page_offset"]
        if offset is None:
            break
    while any(call(url, "GET", f"/collections/ab_{name}")["result"]["status"] != "green" for name in chosen):
        time.sleep(5)
    telemetry = call(url, "GET", "/telemetry?details_level=10")["result"]["collections"]["collections"]
    for collection in telemetry:
        if collection["id"].startswith("ab_"):
            done = collection["shards"][0]["local"]["optimizations"]["optimizations"]
            print(f"{collection['id']}: {copied} points, {done['count']} optimizations, {done['total_duration_micros'] / 1e6:.1f} s")
    rng = random.Random(3)
    times = {name: {kind: [] for kind in ("dense", "dense-session", "sparse")} for name in chosen}
    for point in sample(url, source, 300) * 2:
        for kind in ("dense", "dense-session", "sparse"):
            body = query_body(point, kind, rng=rng)
            # The same query to both, one after the other.
            for name in chosen:
                times[name][kind].append(call(url, "POST", f"/collections/ab_{name}/points/query", body)["time"] * 1e3)
    for name in chosen:
        for kind, values in times[name].items():
            print(f"{name:15} {kind:14} server p50 {quantile(values, .5):6.2f} p95 {quantile(values, .95):6.2f} ms")
    for name in chosen:
        call(url, "DELETE", f"/collections/ab_{name}")


if __name__ == "__main__":
    command, url, collection = sys.argv[1:4]
    if command == "probe":
        probe(url, collection, sys.argv[4:])
    elif command == "layouts":
        layouts(url, collection, int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit(__doc__)
