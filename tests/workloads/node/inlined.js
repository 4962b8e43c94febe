// inlined.js: three small functions share the work 50/30/20 (calls of the same body, 500,
// 300 and 200 per round), all called from round(), which TurboFan optimizes with the three
// inlined into it: their samples are of round()'s optimized code, which prowl splits into
// the inlined functions. Spins for argv[2] seconds after printing "ready". Used by test_node.py.
'use strict';

function fifty(x, i) { return (x * 31 + i) % 1000003; } // body: fifty
function thirty(x, i) { return (x * 31 + i) % 1000003; } // body: thirty
function twenty(x, i) { return (x * 31 + i) % 1000003; } // body: twenty

function round(x) {
  for (let i = 0; i < 500; i++) x = fifty(x, i); // call: fifty
  for (let i = 0; i < 300; i++) x = thirty(x, i); // call: thirty
  for (let i = 0; i < 200; i++) x = twenty(x, i); // call: twenty
  return x;
}

const end = Date.now() + Number(process.argv[2] || 10) * 1000;
let x = 1;
console.log('ready');
while (Date.now() < end) for (let k = 0; k < 1000; k++) x = round(x);
if (x === 42) console.log(x);
