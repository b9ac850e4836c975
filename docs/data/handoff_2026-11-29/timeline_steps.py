import json, collections, statistics as st
ev = []
for r in (0, 1):
    for t, k, tg in json.load(open(f"/tmp/prof/ev{r}.json")): ev.append((t, r, k, tg))
ev.sort()
cnt = collections.Counter(k for _, _, k, _ in ev); print(cnt)
# release -> pass (by same rank, same target), pass -> athead (other rank), athead -> grant
d = collections.defaultdict(list); last = {}
for t, r, k, tg in ev:
    last[(r, tg, k)] = t
    if k == "pass" and (r, tg, "release") in last: d["release->pass (same)"].append(t - last[(r, tg, "release")])
    if k == "athead" and (1 - r, tg, "pass") in last and last[(1-r, tg, "pass")] > last.get((r, tg, "athead_prev"), 0):
        d["pass->athead (other rank)"].append(t - last[(1 - r, tg, "pass")])
    if k == "athead": last[(r, tg, "athead_prev")] = t
    if k == "grant" and (r, tg, "athead") in last: d["athead->grant"].append(t - last[(r, tg, "athead")])
    if k == "release" and (r, tg, "grant") in last: d["grant->release"].append(t - last[(r, tg, "grant")])
for k, v in d.items(): print(f"{k}: n={len(v)} median {st.median(v)*1e6:.1f} us p90 {sorted(v)[int(.9*len(v))]*1e6:.1f}")
