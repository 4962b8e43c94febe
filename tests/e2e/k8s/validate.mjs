// validate.mjs: checks Kubernetes objects against the API's OpenAPI schema (npm package
// kubernetes-models), and reports fields the schema does not know, as the API server would.
import { readFileSync } from "node:fs";

// Reads [{"where": ..., "object": {...}}] as JSON on stdin; prints
// [{"where": ..., "errors": [...]}] as JSON on stdout.

// A field is known when the schema's validator reads it: every object is wrapped in a
// Proxy that records the property names read. Maps (labels, data, ...) are iterated by
// the validator instead, which marks all their keys as known.
function track(value, path, seen) {
  if (value === null || typeof value !== "object") return value;
  const info = { reads: new Set(), iterated: false, path, value };
  for (const k of Object.keys(value)) value[k] = track(value[k], `${path}/${k}`, seen);
  const proxy = new Proxy(value, {
    get(t, k, r) {
      if (typeof k === "string") info.reads.add(k);
      return Reflect.get(t, k, r);
    },
    has(t, k) {
      if (typeof k === "string") info.reads.add(k);
      return Reflect.has(t, k);
    },
    ownKeys(t) {
      info.iterated = true;
      return Reflect.ownKeys(t);
    },
  });
  seen.set(proxy, info);
  return proxy;
}

function unknownFields(proxy, seen, out) {
  const info = seen.get(proxy);
  if (!info) return out;
  for (const k of Object.keys(info.value)) {
    if (!Array.isArray(info.value) && !info.iterated && !info.reads.has(k)) {
      out.push(`${info.path}/${k}: unknown field`);
      continue;
    }
    unknownFields(info.value[k], seen, out);
  }
  return out;
}

async function modelFor(obj) {
  const apiVersion = obj && obj.apiVersion, kind = obj && obj.kind;
  if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[A-Za-z]+$/.test(kind))
    throw new Error("no apiVersion or kind");
  try {
    const mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
    if (mod[kind]) return mod[kind];
  } catch (e) {
    if (e.code !== "ERR_MODULE_NOT_FOUND" && e.code !== "ERR_PACKAGE_PATH_NOT_EXPORTED") throw e;
  }
  throw new Error(`no schema for ${apiVersion} ${kind}`);
}

const input = JSON.parse(readFileSync(0, "utf8"));
const results = [];
for (const { where, object } of input) {
  const errors = [];
  try {
    const Model = await modelFor(object);
    const seen = new WeakMap();
    const tracked = track(structuredClone(object), "", seen);
    try {
      Model.prototype.validate.call(tracked);
    } catch (e) {
      errors.push(e.message);
    }
    if (!errors.length) unknownFields(tracked, seen, errors);
  } catch (e) {
    errors.push(e.message);
  }
  results.push({ where, errors });
}
process.stdout.write(JSON.stringify(results));
