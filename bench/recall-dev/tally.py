#!/usr/bin/env python3
# tally.py RUNDIR [mode]: per-scenario recall for a mode, plus total.
import json,sys,os,collections
d=sys.argv[1]; mode=sys.argv[2] if len(sys.argv)>2 else 'compact'
tot=collections.Counter(); ok=collections.Counter(); fails=collections.Counter(); comp={}
for line in open(os.path.join(d,'trials.jsonl')):
    r=json.loads(line)
    if r.get('mode')!=mode: continue
    s=r['scenario']
    for x in r['recall']:
        tot[s]+=1; ok[s]+=x['correct']
    if not r['passed']:
        bad=[v.get('grader') for v in r['verdicts'] if not v.get('passed',True)]
        fails[s]+=1
    comp.setdefault(s,[]).append(r['stats'].get('compactions'))
T=sum(tot.values()); O=sum(ok.values())
for s in sorted(tot): print(f"{s:45s} {ok[s]:3d}/{tot[s]:3d}  compactions={comp[s]} notpassed={fails[s]}")
print(f"TOTAL {O}/{T} = {100*O/max(T,1):.1f}%")
