import json, collections, statistics as st, bisect
E = {r: json.load(open(f"/tmp/prof/ev{r}.json")) for r in (0, 1)}
for r in (0, 1):
    other = 1 - r
    passes = [(t, tg) for t, k, tg in E[other] if k == "pass"]
    mine = [(t, k) for t, k, tg in E[r] if k.startswith("c_") or k == "athead"]
    mt = [m[0] for m in mine]
    state_at_pass = collections.Counter(); lat_by_state = collections.defaultdict(list)
    ah = [t for t, k, tg in E[r] if k == "athead"]
    for tp, tg in passes:
        i = bisect.bisect_right(mt, tp) - 1
        stt = mine[i][1] if i >= 0 else "?"
        j = bisect.bisect_left(ah, tp)
        if j < len(ah):
            state_at_pass[stt] += 1; lat_by_state[stt].append(ah[j] - tp)
    print(f"rank {r}: state at the other's pass:", {k: (v, round(st.median(lat_by_state[k])*1e6, 1)) for k, v in state_at_pass.items()})
    # durations of phases
    d = collections.defaultdict(list)
    for (t1, k1), (t2, k2) in zip(mine, mine[1:]):
        if k1.startswith("c_"): d[k1].append(t2 - t1)
    print("   phase medians (us):", {k: round(st.median(v)*1e6, 1) for k, v in d.items()})
