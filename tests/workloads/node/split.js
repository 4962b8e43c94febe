// split.js: three functions share the work 50/30/20, each with its own busy loop (the
// lines marked "loop:" are what the tests expect as the hot line), called round after
// round for argv[2] seconds; prints "ready" once, then spins. Used by test_node.py.
'use strict';

function mix(x, i) {
  return (x * 31 + i) % 1000003;
}

function fifty(n) {
  let x = 1;
  for (let i = 0; i < n; i++) x = mix(x, i); // loop: fifty
  return x;
}

function thirty(n) {
  let x = 2;
  for (let i = 0; i < n; i++) x = mix(x, i); // loop: thirty
  return x;
}

function twenty(n) {
  let x = 3;
  for (let i = 0; i < n; i++) x = mix(x, i); // loop: twenty
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
