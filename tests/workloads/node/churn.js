// churn.js: allocates hard while running known functions, for argv[2] seconds: each round
// makes a fresh function genN (new SharedFunctionInfo, bytecode and code), runs it until V8
// optimizes it, deoptimizes it with a string, and drops it; makeObjects builds short-lived
// objects and closures (bump), a ring keeps some long enough to be promoted, so scavenges and
// full (compacting) collections move functions and code. Prints "ready" once. The test knows
// which function calls which (test_node_more.py CALLERS): keep the two in step.
'use strict';
// The process turns on V8's own gc() and always-compacting collections from inside (node's
// command line stays bare): every few rounds a full collection moves code and functions.
const v8 = require('v8');
v8.setFlagsFromString('--expose-gc');
v8.setFlagsFromString('--stress-compaction');
const gc = require('vm').runInNewContext('gc');

function makeClosure(k) {
  let c = k;
  return function bump(v) { c = (c * 33 + v) % 1000003; return c; };
}

const ring = new Array(1 << 17);
let slot = 0;

function makeObjects(r) {
  let acc = 0;
  for (let i = 0; i < 2000; i++) {
    const o = { r, i, s: 'o' + i, a: [i, r, i ^ r], f: makeClosure(i) };
    acc += o.f(o.a[2]);
    if ((i & 1) === 0) ring[slot++ & 0x1ffff] = o;
  }
  return acc;
}

function churnRound(r) {
  const gen = new Function('m', 'return function gen' + r +
    '(x) { let s = m; for (let i = 0; i < 3000; i++) s = (s * 31 + x + i) % 1000003; return s; }')(r);
  let acc = 0;
  for (let i = 0; i < 300; i++) acc += gen(i);
  acc += Number(gen('deopt' + r)) || 0;
  for (let i = 0; i < 50; i++) acc += gen(i);
  acc += makeObjects(r);
  const b = makeClosure(r);
  for (let i = 0; i < 20000; i++) acc = b(acc + i);
  return acc;
}

function main(seconds) {
  const end = Date.now() + seconds * 1000;
  let sink = 0;
  for (let r = 0; Date.now() < end; r++) {
    sink += churnRound(r);
    if (r % 8 === 7) gc();
    if (r === 20) console.log('ready');
  }
  return sink;
}

if (main(Number(process.argv[2] || 10)) === 42) console.log('?');
