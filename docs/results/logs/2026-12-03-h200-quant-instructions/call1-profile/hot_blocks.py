import csv,sys,collections,re
rows=list(csv.reader(open(sys.argv[1])))
hdr=rows[1]; ia=hdr.index("Address"); isrc=hdr.index("Source"); ie=hdr.index("Instructions Executed"); iss=hdr.index("Warp Stall Sampling (All Samples)")
data=[(int(r[ia],16),r[isrc].strip(),int(r[ie]),int(r[iss])) for r in rows[2:] if len(r)>ie and r[ia].startswith('0x')]
base=data[0][0]
tot=sum(d[2] for d in data); totS=sum(d[3] for d in data)
print("total warp instr",tot,"samples",totS)
# basic blocks: runs of equal count
blocks=[];cur=None
for a,s,e,st in data:
    if cur and cur['n']==e: cur['ins'].append((a,s,st))
    else:
        cur={'n':e,'ins':[(a,s,st)]}; blocks.append(cur)
hot=sorted(blocks,key=lambda b:-b['n']*len(b['ins']))
for b in hot[:int(sys.argv[2])]:
    ops=collections.Counter(re.sub(r'^@!?U?P\w+\s+','',s).split()[0].split('.')[0] for _,s,_ in b['ins'])
    w=b['n']*len(b['ins'])
    print(f"{b['ins'][0][0]-base:#07x}-{b['ins'][-1][0]-base:#07x} len={len(b['ins'])} x{b['n']} = {w} ({100*w/tot:.1f}%) stall={sum(x[2] for x in b['ins'])}  {ops.most_common(10)}")
