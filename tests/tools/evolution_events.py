#!/usr/bin/env python3
"""Do the truth's evolution entries (group_splits, group_joins, group_leaves, group_merges)
appear as neardup.clusters events (very_similar level) during their round?
usage: python3 evolution_events.py truth.json clusters.jsonl"""
import json, sys
truth = json.load(open(sys.argv[1]))
events = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
events = [e for e in events if e.get("level") == "very_similar"]
member = {}  # url -> cluster id, replayed from the events
i = 0
for r in truth["rounds"]:
    start, end = r["start"], r["end"]
    added, removed = set(), set()
    # events up to the round's end (event times are RFC 3339 UTC, comparable as strings)
    while i < len(events) and events[i]["at"] <= end:
        e = events[i]; i += 1
        for u in e.get("removed", []):
            if member.get(u) == e["cluster_id"]:
                del member[u]
            if e["at"] >= start: removed.add(u)
        for u in e.get("added", []):
            member[u] = e["cluster_id"]
            if e["at"] >= start: added.add(u)
        if e["change"] == "dissolved":
            for u in [u for u, c in member.items() if c == e["cluster_id"]]:
                del member[u]
                if e["at"] >= start: removed.add(u)
    ev = r.get("evolution") or {}
    leaves = [(g["group"], u) for g in ev.get("group_leaves", []) for u in g["urls"]]
    joins = [(g["group"], u) for g in ev.get("group_joins", []) for u in g["urls"]]
    lf = sum(1 for _, u in leaves if u in removed)
    jf = sum(1 for _, u in joins if u in added)
    sf = 0
    for s in ev.get("group_splits", []):
        parts = [p["urls"] for p in s["after"] if p["urls"]]
        # each part's URLs are kept apart from the other parts at the round's end
        ok = all(member.get(a) is None or member.get(a) != member.get(b)
                 for k, pa in enumerate(parts) for pb in parts[k + 1:] for a in pa for b in pb)
        named = any(u in added or u in removed for p in parts for u in p)
        sf += ok and named
    mf = 0
    for m in ev.get("group_merges", []):
        urls = [u for p in m.get("before", []) for u in (p.get("urls", []) if isinstance(p, dict) else [])]
        mf += len({member.get(u) for u in urls}) == 1 and None not in {member.get(u) for u in urls}
    print(f"{r['crawl_id']}: leaves {lf}/{len(leaves)} URLs, joins {jf}/{len(joins)} URLs, "
          f"splits {sf}/{len(ev.get('group_splits', []))}, merges {mf}/{len(ev.get('group_merges', []))}")
