import json, collections, statistics as st
ev = []
for r in (0, 1):
    for t, k, tg in json.load(open(f"/tmp/prof/ev{r}.json")): ev.append((t, r, k, tg))
ev.sort()
# per lock target: sequence of grant/release
hold = collections.defaultdict(list); gap = collections.defaultdict(list); wait = []
last_rel = {}; cur = {}; acq = {}
for t, r, k, tg in ev:
    if k == "acquire": acq[(r, tg)] = t
    if k == "grant":
        if tg in last_rel and last_rel[tg][1] != r: gap[tg].append(t - last_rel[tg][0])
        cur[tg] = (t, r)
        if (r, tg) in acq: wait.append(t - acq.pop((r, tg)))
    if k == "release":
        if tg in cur: hold[tg].append(t - cur[tg][0])
        last_rel[tg] = (t, r)
span = ev[-1][0] - ev[0][0]
for tg in sorted(hold):
    h = hold[tg]; g = gap[tg]
    print(f"lock {tg}: {len(h)} holds, median hold {st.median(h)*1e6:.1f} us, busy {sum(h)/span:.0%}; hand-off gaps {len(g)} median {st.median(g)*1e6:.1f} us, sum {sum(g)/span:.0%}")
print(f"acquire→grant median {st.median(wait)*1e6:.1f} us")
