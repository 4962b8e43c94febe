// async.js: a class method and an async chain that do the work, for argv[2] seconds;
// prints "ready" once, then spins. Used by test_node_more.py.
//  - Cart.prototype.total: busy in its own loop (line marked "loop: total");
//  - checkout() awaits price(), which resumes after an await and busies itself in
//    its loop (line marked "loop: price"): its frames run from V8's microtask queue.
'use strict';

class Cart {
  constructor(n) {
    this.n = n;
  }

  total() {
    let x = 1;
    for (let i = 0; i < this.n; i++) x = (x * 31 + i) % 1000003; // loop: total
    return x;
  }
}

async function price(n) {
  await null; // the rest runs when the microtask queue resumes it
  let x = 2;
  for (let i = 0; i < n; i++) x = (x * 37 + i) % 1000003; // loop: price
  return x;
}

async function checkout(n) {
  const p = await price(n);
  return p + new Cart(n).total();
}

async function main() {
  const end = Date.now() + Number(process.argv[2] || 10) * 1000;
  let sink = 0;
  console.log('ready');
  while (Date.now() < end) sink += await checkout(200000);
  if (sink === 42) console.log(sink);
}

main();
