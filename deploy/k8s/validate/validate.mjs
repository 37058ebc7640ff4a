// Validates Kubernetes manifests offline against the Kubernetes OpenAPI
// schemas, through the kubernetes-models package (no cluster, no network).
//
// Usage: node deploy/k8s/validate/validate.mjs FILE...
// A FILE holds documents separated by lines "---", each a JSON object
// (what `geops deploy k8s` writes). Prints one line per object; exits 1 if
// any object is invalid or of a kind it cannot check.
import { readFileSync } from "node:fs";

// apiVersion -> the package's folder: "v1" (core) -> "v1", "apps/v1" -> "apps/v1".
async function modelFor(apiVersion, kind) {
  try {
    const mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
    return mod[kind];
  } catch (e) {
    return null;
  }
}

let failed = 0;
let checked = 0;
for (const file of process.argv.slice(2)) {
  const docs = readFileSync(file, "utf8").split(/^---$/m).map((d) => d.trim()).filter((d) => d.length > 0);
  for (const text of docs) {
    let obj;
    try {
      obj = JSON.parse(text);
    } catch (e) {
      console.log(`${file}: not JSON: ${e.message}`);
      failed++;
      continue;
    }
    const what = `${obj.kind} ${obj.metadata?.name ?? "?"}`;
    const Model = await modelFor(obj.apiVersion, obj.kind);
    if (!Model) {
      console.log(`${file}: ${what}: no schema for ${obj.apiVersion} ${obj.kind}`);
      failed++;
      continue;
    }
    try {
      new Model(obj).validate();
      checked++;
      console.log(`valid   ${what}`);
    } catch (e) {
      failed++;
      console.log(`INVALID ${what}: ${e.message}`);
    }
  }
}
console.log(`${checked} valid, ${failed} invalid`);
process.exit(failed === 0 && checked > 0 ? 0 : 1);
