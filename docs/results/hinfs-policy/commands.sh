#!/usr/bin/env bash
set -uo pipefail
A=${AMBERFS:-target/release/amberfs}
O=${OUT:-docs/results/hinfs-policy}
mkdir -p $O
c=(--reps 3 --ops 20000 --threads 1 --pool-size 2G)
run() { local name=$1 em=$2; shift 2; $A --emulate "$em" bench --quiet compare "$@" "${c[@]}" --json $O/$name.json > $O/$name.txt 2>&1; echo "$name done $(date +%T)"; }

for w in fileserver webproxy webserver varmail; do run $w-pcm pcm --workload $w --target amberfs:direct --target amberfs:hinfs; done
run varmail-wb pcm --workload varmail --target amberfs:hinfs-wb --target amberfs:hinfs
run randwrite-fsync4 pcm --workload randwrite --io-size 4K --fsync 4 --target amberfs:hinfs-wb --target amberfs:hinfs --target amberfs:direct
run randwrite-1k-fsync1 pcm --workload randwrite --io-size 1K --fsync 1 --target amberfs:hinfs-wb --target amberfs:hinfs --target amberfs:direct
run fileserver-1k pcm --workload fileserver --io-size 1000 --append-size 1000 --target amberfs:hinfs-nclfw,buffer=25M --target amberfs:hinfs,buffer=25M
for lat in 50 100 200 400 800; do run fileserver-lat$lat "lat=${lat}ns,per=line,bw=1GB/s" --workload fileserver --target amberfs:direct --target amberfs:hinfs; done
run fileserver-dram dram --workload fileserver --target amberfs:direct --target amberfs:hinfs
run varmail-dram dram --workload varmail --target amberfs:direct --target amberfs:hinfs
run fileserver-buffer pcm --workload fileserver --target amberfs:direct --target amberfs:hinfs,buffer=25M --target amberfs:hinfs,buffer=50M --target amberfs:hinfs,buffer=125M --target amberfs:hinfs,buffer=250M
echo ALL DONE
