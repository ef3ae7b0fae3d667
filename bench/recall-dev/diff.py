#!/usr/bin/env python3
# ab.py RUN_A RUN_B: per-probe diff of compact recall.
import json,sys,os
def load(d):
    m={}
    for line in open(os.path.join(d,'trials.jsonl')):
        r=json.loads(line)
        if r.get('mode')!='compact': continue
        for x in r['recall']:
            m[(r['scenario'],r['trial'],x['fact'],x['step'])]=(x['correct'],x.get('answer'))
    return m
a=load(sys.argv[1]); b=load(sys.argv[2])
for k in sorted(set(a)|set(b)):
    ca=a.get(k,(None,None)); cb=b.get(k,(None,None))
    if ca[0]!=cb[0]: print(('GAIN ' if cb[0] else 'LOSS '),k)
