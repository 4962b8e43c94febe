// split.js: three functions share the work 50/30/20, each with its own busy loop (the
// lines marked "loop:" are what the tests expect as the hot line), called round after
// round for argv[2] seconds; prints "ready" once, then spins. Used by test_node.py.
// Each of the three carries a branch never taken (n < 0) that makes its bytecode larger
// than TurboFan inlines (460 bytes), so that once main() is optimized they stay frames of
// their own, each with mix() inlined into it (inlined.js is the variant whose three are inlined).
'use strict';

function mix(x, i) {
  return (x * 31 + i) % 1000003;
}

function fifty(n) {
  let x = 1;
  for (let i = 0; i < n; i++) x = mix(x, i); // loop: fifty
  if (n < 0) { x = mix(x + 0, 1); x = mix(x + 0, 2); x = mix(x + 0, 3); x = mix(x + 0, 4); x = mix(x + 0, 5); x = mix(x + 0, 6); x = mix(x + 0, 7); x = mix(x + 0, 8); x = mix(x + 0, 9); x = mix(x + 0, 10); x = mix(x + 0, 11); x = mix(x + 0, 12); }
  if (n < 0) { x = mix(x + 1, 1); x = mix(x + 1, 2); x = mix(x + 1, 3); x = mix(x + 1, 4); x = mix(x + 1, 5); x = mix(x + 1, 6); x = mix(x + 1, 7); x = mix(x + 1, 8); x = mix(x + 1, 9); x = mix(x + 1, 10); x = mix(x + 1, 11); x = mix(x + 1, 12); }
  if (n < 0) { x = mix(x + 2, 1); x = mix(x + 2, 2); x = mix(x + 2, 3); x = mix(x + 2, 4); x = mix(x + 2, 5); x = mix(x + 2, 6); x = mix(x + 2, 7); x = mix(x + 2, 8); x = mix(x + 2, 9); x = mix(x + 2, 10); x = mix(x + 2, 11); x = mix(x + 2, 12); }
  if (n < 0) { x = mix(x + 3, 1); x = mix(x + 3, 2); x = mix(x + 3, 3); x = mix(x + 3, 4); x = mix(x + 3, 5); x = mix(x + 3, 6); x = mix(x + 3, 7); x = mix(x + 3, 8); x = mix(x + 3, 9); x = mix(x + 3, 10); x = mix(x + 3, 11); x = mix(x + 3, 12); }
  if (n < 0) { x = mix(x + 4, 1); x = mix(x + 4, 2); x = mix(x + 4, 3); x = mix(x + 4, 4); x = mix(x + 4, 5); x = mix(x + 4, 6); x = mix(x + 4, 7); x = mix(x + 4, 8); x = mix(x + 4, 9); x = mix(x + 4, 10); x = mix(x + 4, 11); x = mix(x + 4, 12); }
  if (n < 0) { x = mix(x + 5, 1); x = mix(x + 5, 2); x = mix(x + 5, 3); x = mix(x + 5, 4); x = mix(x + 5, 5); x = mix(x + 5, 6); x = mix(x + 5, 7); x = mix(x + 5, 8); x = mix(x + 5, 9); x = mix(x + 5, 10); x = mix(x + 5, 11); x = mix(x + 5, 12); }
  return x;
}

function thirty(n) {
  let x = 2;
  for (let i = 0; i < n; i++) x = mix(x, i); // loop: thirty
  if (n < 0) { x = mix(x + 0, 1); x = mix(x + 0, 2); x = mix(x + 0, 3); x = mix(x + 0, 4); x = mix(x + 0, 5); x = mix(x + 0, 6); x = mix(x + 0, 7); x = mix(x + 0, 8); x = mix(x + 0, 9); x = mix(x + 0, 10); x = mix(x + 0, 11); x = mix(x + 0, 12); }
  if (n < 0) { x = mix(x + 1, 1); x = mix(x + 1, 2); x = mix(x + 1, 3); x = mix(x + 1, 4); x = mix(x + 1, 5); x = mix(x + 1, 6); x = mix(x + 1, 7); x = mix(x + 1, 8); x = mix(x + 1, 9); x = mix(x + 1, 10); x = mix(x + 1, 11); x = mix(x + 1, 12); }
  if (n < 0) { x = mix(x + 2, 1); x = mix(x + 2, 2); x = mix(x + 2, 3); x = mix(x + 2, 4); x = mix(x + 2, 5); x = mix(x + 2, 6); x = mix(x + 2, 7); x = mix(x + 2, 8); x = mix(x + 2, 9); x = mix(x + 2, 10); x = mix(x + 2, 11); x = mix(x + 2, 12); }
  if (n < 0) { x = mix(x + 3, 1); x = mix(x + 3, 2); x = mix(x + 3, 3); x = mix(x + 3, 4); x = mix(x + 3, 5); x = mix(x + 3, 6); x = mix(x + 3, 7); x = mix(x + 3, 8); x = mix(x + 3, 9); x = mix(x + 3, 10); x = mix(x + 3, 11); x = mix(x + 3, 12); }
  if (n < 0) { x = mix(x + 4, 1); x = mix(x + 4, 2); x = mix(x + 4, 3); x = mix(x + 4, 4); x = mix(x + 4, 5); x = mix(x + 4, 6); x = mix(x + 4, 7); x = mix(x + 4, 8); x = mix(x + 4, 9); x = mix(x + 4, 10); x = mix(x + 4, 11); x = mix(x + 4, 12); }
  if (n < 0) { x = mix(x + 5, 1); x = mix(x + 5, 2); x = mix(x + 5, 3); x = mix(x + 5, 4); x = mix(x + 5, 5); x = mix(x + 5, 6); x = mix(x + 5, 7); x = mix(x + 5, 8); x = mix(x + 5, 9); x = mix(x + 5, 10); x = mix(x + 5, 11); x = mix(x + 5, 12); }
  return x;
}

function twenty(n) {
  let x = 3;
  for (let i = 0; i < n; i++) x = mix(x, i); // loop: twenty
  if (n < 0) { x = mix(x + 0, 1); x = mix(x + 0, 2); x = mix(x + 0, 3); x = mix(x + 0, 4); x = mix(x + 0, 5); x = mix(x + 0, 6); x = mix(x + 0, 7); x = mix(x + 0, 8); x = mix(x + 0, 9); x = mix(x + 0, 10); x = mix(x + 0, 11); x = mix(x + 0, 12); }
  if (n < 0) { x = mix(x + 1, 1); x = mix(x + 1, 2); x = mix(x + 1, 3); x = mix(x + 1, 4); x = mix(x + 1, 5); x = mix(x + 1, 6); x = mix(x + 1, 7); x = mix(x + 1, 8); x = mix(x + 1, 9); x = mix(x + 1, 10); x = mix(x + 1, 11); x = mix(x + 1, 12); }
  if (n < 0) { x = mix(x + 2, 1); x = mix(x + 2, 2); x = mix(x + 2, 3); x = mix(x + 2, 4); x = mix(x + 2, 5); x = mix(x + 2, 6); x = mix(x + 2, 7); x = mix(x + 2, 8); x = mix(x + 2, 9); x = mix(x + 2, 10); x = mix(x + 2, 11); x = mix(x + 2, 12); }
  if (n < 0) { x = mix(x + 3, 1); x = mix(x + 3, 2); x = mix(x + 3, 3); x = mix(x + 3, 4); x = mix(x + 3, 5); x = mix(x + 3, 6); x = mix(x + 3, 7); x = mix(x + 3, 8); x = mix(x + 3, 9); x = mix(x + 3, 10); x = mix(x + 3, 11); x = mix(x + 3, 12); }
  if (n < 0) { x = mix(x + 4, 1); x = mix(x + 4, 2); x = mix(x + 4, 3); x = mix(x + 4, 4); x = mix(x + 4, 5); x = mix(x + 4, 6); x = mix(x + 4, 7); x = mix(x + 4, 8); x = mix(x + 4, 9); x = mix(x + 4, 10); x = mix(x + 4, 11); x = mix(x + 4, 12); }
  if (n < 0) { x = mix(x + 5, 1); x = mix(x + 5, 2); x = mix(x + 5, 3); x = mix(x + 5, 4); x = mix(x + 5, 5); x = mix(x + 5, 6); x = mix(x + 5, 7); x = mix(x + 5, 8); x = mix(x + 5, 9); x = mix(x + 5, 10); x = mix(x + 5, 11); x = mix(x + 5, 12); }
  return x;
}

class Shop {
  constructor(n) { this.n = n; }
  restock() {
    let x = 4;
    for (let i = 0; i < this.n; i++) x = mix(x, i); // loop: restock
    return x;
  }
}

async function inner(n) {
  return new Shop(n).restock();
}

async function outer(n) {
  return await inner(n);
}

const seconds = Number(process.argv[2] || 10);
const mode = process.argv[3] || 'split';
const end = Date.now() + seconds * 1000;
let sink = 0;
console.log('ready');
async function main() {
  while (Date.now() < end) {
    if (mode === 'async') {
      sink += await outer(200000);
    } else {
      sink += fifty(50000);
      sink += thirty(30000);
      sink += twenty(20000);
    }
  }
  if (sink === 42) console.log(sink);
}
main();
