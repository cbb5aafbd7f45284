#!/usr/bin/env bash
# build the A/B base (aff9915's day50 code) in /tmp/ab_base, niced, with ptxas's lines; log in $1
log=$1
rm -rf /tmp/ab_base && mkdir -p /tmp/ab_base
tar cf - --exclude=./results --exclude=./out --exclude=./day50_gpt/build --exclude=./.git . | (cd /tmp/ab_base && tar xf -)
cp -r out/abbase/. /tmp/ab_base/
(cd /tmp/ab_base && NVCCFLAGS="-Xptxas -v" nice -n 19 make -C day50_gpt -j8 build/gpt > "$log" 2>&1; echo "rc=$?" >> "$log")
