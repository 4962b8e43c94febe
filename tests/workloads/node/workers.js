// workers.js: the main thread and two worker_threads (ant, bee) each run functions of their
// own (mainSpin/mainStep, antSpin/antStep, beeSpin/beeStep) for argv[2] seconds; prints
// "ready" once both workers run. Used by test_node_more.py: each thread's samples name its own.
'use strict';
const { Worker, isMainThread, workerData, parentPort } = require('worker_threads');

function mainStep(x, i) { return (x * 31 + i) % 1000003; }
function mainSpin(n) { let x = 1; for (let i = 0; i < n; i++) x = mainStep(x, i); return x; }
function antStep(x, i) { return (x * 37 + i) % 1000033; }
function antSpin(n) { let x = 2; for (let i = 0; i < n; i++) x = antStep(x, i); return x; }
function beeStep(x, i) { return (x * 41 + i) % 1000037; }
function beeSpin(n) { let x = 3; for (let i = 0; i < n; i++) x = beeStep(x, i); return x; }

const SPIN = { main: mainSpin, ant: antSpin, bee: beeSpin };

function run(role, end) {
  let sink = 0;
  while (Date.now() < end) sink += SPIN[role](100000);
  return sink;
}

if (isMainThread) {
  const end = Date.now() + Number(process.argv[2] || 10) * 1000;
  let started = 0;
  for (const role of ['ant', 'bee']) {
    const w = new Worker(__filename, { workerData: { role, end } });
    w.on('message', () => {
      if (++started === 2) {
        console.log('ready');
        setImmediate(() => run('main', end));
      }
    });
  }
} else {
  parentPort.postMessage('started');
  run(workerData.role, workerData.end);
}
